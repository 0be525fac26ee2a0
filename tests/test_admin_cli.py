"""The `concord` admin command, run as operators run it (the venv's entry point, a
subprocess) against a live server and checked through the Python client."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import concord
from support import free_port, wait_until

CONCORD = Path(sys.executable).with_name("concord")
COMMAND = [str(CONCORD)] if CONCORD.exists() else [sys.executable, "-m", "concord.admin"]
TIMEOUT = 60  # a bound on each command, far above what it needs


def run(target: str, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, "--target", target, *args] if target else [*COMMAND, *args],
                          input=stdin, capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, **(env or {})})


def run_json(target: str, *args: str):
    done = run(target, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def unique() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def test_lists_and_describes_locks_semaphores_queues_and_chats(concord_server, client, unique):
    target = concord_server.target
    lock = client.lock(f"{unique}:lock", ttl=60, owner="ops-test")
    lease = lock.acquire()
    sem = client.semaphore(f"{unique}:sem", limit=3, permits=2, ttl=60, owner="sem-owner")
    permit = sem.acquire()
    client.queue(f"{unique}:q").put("email", b"x")
    chat_id = client.chat.create(f"{unique}-ann", [f"{unique}-bob"], "hello bob", chat_id=f"{unique}:chat")
    try:
        assert f"{unique}:lock" in run_json(target, "lock", "list")
        assert f"{unique}:sem" in run_json(target, "semaphore", "list")
        assert f"{unique}:q" in run_json(target, "queue", "list")
        assert chat_id in run_json(target, "chat", "list")

        described = run_json(target, "lock", "describe", f"{unique}:lock")
        assert (described["held"], described["owner"], int(described["fencing_token"])) == (
            True, "ops-test", lease.fencing_token)
        sem_state = run_json(target, "semaphore", "describe", f"{unique}:sem")
        assert (sem_state["limit"], sem_state["held"]) == (3, 2)
        assert [h["owner"] for h in sem_state["holders"]] == ["sem-owner"]
        assert int(run_json(target, "queue", "describe", f"{unique}:q")["ready"]) == 1
        chat = run_json(target, "chat", "describe", chat_id)
        assert [(m["sender"], m["body"]) for m in chat["messages"]] == [(f"{unique}-ann", "hello bob")]

        table = run(target, "lock", "describe", f"{unique}:lock")
        assert table.returncode == 0 and "FENCING_TOKEN" in table.stdout and "ops-test" in table.stdout
    finally:
        lock.release(lease)
        sem.release(permit)
    # Free again: no longer listed (nobody holds or waits for it).
    assert f"{unique}:lock" not in run_json(target, "lock", "list")


def test_force_release_asks_first_and_hands_the_lock_to_the_waiter(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:lock"
    lock = client.lock(name, ttl=60, owner="stuck-holder")
    lease = lock.acquire()

    declined = run(target, "lock", "force-release", name, stdin="n\n")
    assert declined.returncode == 1 and "nothing changed" in declined.stderr
    assert "Traceback" not in declined.stderr
    info = lock.describe()
    assert (info.held, info.fencing_token) == (True, lease.fencing_token)

    got: queue.Queue = queue.Queue()
    waiter = threading.Thread(target=lambda: got.put(client.lock(name, ttl=60, owner="waiter").acquire(timeout=50)))
    waiter.start()
    wait_until(lambda: lock.describe().waiters == 1, timeout=30, message="the waiter queued")

    accepted = run(target, "--json", "lock", "force-release", name, stdin="y\n")
    assert accepted.returncode == 0, accepted.stderr
    out = json.loads(accepted.stdout)
    assert (out["released"], out["owner"], int(out["fencing_token"])) == (True, "stuck-holder", lease.fencing_token)
    waiter.join(timeout=50)
    second = got.get(timeout=1)
    assert second is not None and second.fencing_token > lease.fencing_token
    with pytest.raises(concord.LockNotHeld):
        lock.release(lease)
    assert lock.describe().owner == "waiter"
    lock.release(second)

    nobody = run_json(target, "lock", "force-release", name, "--yes")
    assert nobody["released"] is False


def test_dead_tasks_are_shown_and_retried(concord_server, client, unique):
    target, q = concord_server.target, client.queue(f"{unique}:q")
    task_id = q.put("flaky", b"{}", max_attempts=1)
    [task] = q.get(lease_ttl=30)
    q.nack(task, "it broke")
    dead = run_json(target, "queue", "dead", f"{unique}:q")
    assert [t["task_id"] for t in dead] == [task_id]
    table = run(target, "queue", "dead", f"{unique}:q")
    assert table.returncode == 0 and task_id in table.stdout and "it broke" in table.stdout

    retried = run_json(target, "queue", "retry-dead", f"{unique}:q", task_id)
    assert retried["retried"] == 1
    stats = q.stats()
    assert (stats.ready, stats.dead) == (1, 0)
    assert run_json(target, "queue", "dead", f"{unique}:q") == []


def test_queue_pause_and_resume(concord_server, client, unique):
    target, q = concord_server.target, client.queue(f"{unique}:pq")
    assert run_json(target, "queue", "pause", f"{unique}:pq") == {"queue": f"{unique}:pq", "paused": True,
                                                                 "was_paused": False}
    assert q.stats().paused
    assert "paused" in run(target, "queue", "describe", f"{unique}:pq").stdout
    resumed = run(target, "queue", "resume", f"{unique}:pq")
    assert resumed.returncode == 0 and "resumed" in resumed.stdout and not q.stats().paused


def test_tail_prints_messages_sent_after_it_starts(concord_server, client, unique):
    target, ann, bob = concord_server.target, f"{unique}-ann", f"{unique}-bob"
    chat_id = client.chat.create(ann, [bob], "before the tail", chat_id=f"{unique}:chat")
    proc = subprocess.Popen([*COMMAND, "--target", target, "--json", "chat", "tail", chat_id, "--as", bob],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        assert "tailing chat" in proc.stderr.readline()  # it has read where the chat stands
        client.chat.send(chat_id, ann, "first live")
        client.chat.send(chat_id, bob, "second live")
        seen = [json.loads(lines.get(timeout=30)) for _ in range(2)]
        assert [(m["sender"], m["body"]) for m in seen] == [(ann, "first live"), (bob, "second live")]
        assert proc.poll() is None  # still following
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # Tailing marked nothing seen for bob.
    assert [m.body for m in client.chat.fetch_pending(bob) if hasattr(m, "body")] == [
        "before the tail", "first live", "second live"]


def test_errors_are_one_line_and_usage_is_exit_2(concord_server, unique):
    bad = run(concord_server.target, "lock", "describe", "")
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and "name" in bad.stderr and "Traceback" not in bad.stderr

    missing = run(concord_server.target, "queue", "describe")
    assert missing.returncode == 2

    from_env = run("", "--json", "lock", "describe", f"{unique}:free", env={"CONCORD_TARGET": concord_server.target})
    assert from_env.returncode == 0 and json.loads(from_env.stdout)["held"] is False

    down = run(f"127.0.0.1:{free_port()}", "--timeout", "2", "lock", "list")
    assert down.returncode == 1 and "Traceback" not in down.stderr and down.stderr.count("\n") == 1


def test_version():
    done = run("", "--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"concord {concord.__version__}")


def test_json_integers_are_numbers_and_tables_show_human_durations(concord_server, client, unique):
    """protobuf's JSON writes 64-bit integers as strings ("fencing_token": "7") and
    32-bit ones as numbers; the CLI writes every integer as a number."""
    target = concord_server.target
    lock = client.lock(f"{unique}:lock", ttl=90, owner="ops-test")
    lease = lock.acquire()
    client.queue(f"{unique}:q").put("email", b"x")
    dead = client.queue(f"{unique}:dead")
    dead.put("flaky", b"{}", max_attempts=1)
    [task] = dead.get(lease_ttl=30)
    dead.nack(task, "it broke")
    chat_id = client.chat.create(f"{unique}-ann", [f"{unique}-bob"], "hello", chat_id=f"{unique}:chat")
    try:
        described = run_json(target, "lock", "describe", f"{unique}:lock")
        assert described["fencing_token"] == lease.fencing_token and described["waiters"] == 0
        stats = run_json(target, "queue", "describe", f"{unique}:q")
        assert all(type(stats[k]) is int for k in ("ready", "delayed", "leased", "dead")), stats
        assert [type(m["message_id"]) for m in run_json(target, "chat", "describe", chat_id)["messages"]] == [int]
        [t] = run_json(target, "queue", "dead", f"{unique}:dead")
        assert type(t["attempt"]) is int and type(t["max_attempts"]) is int, t

        table = run(target, "lock", "describe", f"{unique}:lock").stdout
        ttl = table.splitlines()[1].split()[4]  # NAME HELD OWNER FENCING_TOKEN TTL_REMAINING WAITERS
        assert re.fullmatch(r"1m[0-3]?\ds", ttl), table  # of 90 s, not "89.873s"
    finally:
        lock.release(lease)
    released = run_json(target, "lock", "force-release", f"{unique}:lock", "--yes")
    assert released["released"] is False and type(released["fencing_token"]) is int


def test_describe_says_when_there_is_nothing_to_show(concord_server, unique):
    target = concord_server.target
    for kind, text in [("lock", f"lock '{unique}:none' is not held (no holder, no waiters)"),
                       ("semaphore", f"semaphore '{unique}:none' is not held (no holders, no waiters)"),
                       ("queue", f"queue '{unique}:none' holds no tasks")]:
        done = run(target, kind, "describe", f"{unique}:none")
        assert (done.returncode, done.stdout.strip(), done.stderr) == (0, text, ""), (kind, done)
    assert run_json(target, "lock", "describe", f"{unique}:none")["held"] is False
    missing = run(target, "chat", "describe", f"{unique}:none")
    assert missing.returncode == 1 and missing.stderr == f"concord: chat '{unique}:none' does not exist\n"


def test_chat_describe_shows_the_latest_messages(concord_server, client, unique):
    ann, bob = f"{unique}-ann", f"{unique}-bob"
    chat_id = client.chat.create(ann, [bob], "message 0", chat_id=f"{unique}:chat")
    for i in range(1, 15):
        client.chat.send(chat_id, ann if i % 2 else bob, f"message {i}")
    shown = run_json(concord_server.target, "chat", "describe", chat_id, "--limit", "3")
    assert [m["body"] for m in shown["messages"]] == ["message 12", "message 13", "message 14"]
    assert shown["last_id"] == shown["messages"][-1]["message_id"] == max(m.message_id for m in client.chat.history(
        chat_id, limit=100))
    table = run(concord_server.target, "chat", "describe", chat_id)
    assert "message 14" in table.stdout and "message 4" not in table.stdout  # the latest 10 of 15


def test_tail_shows_only_what_is_sent_after_it_starts(concord_server, client, unique):
    """Old messages, unseen by the member or not, are history: tail prints none of them."""
    target, ann, bob = concord_server.target, f"{unique}-ann", f"{unique}-bob"
    chat_id = client.chat.create(ann, [bob], "old 0", chat_id=f"{unique}:chat")
    for i in range(1, 5):
        client.chat.send(chat_id, ann, f"old {i}")
    proc = subprocess.Popen([*COMMAND, "--target", target, "chat", "tail", chat_id, "--as", bob],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        assert "tailing chat" in proc.stderr.readline()
        client.chat.send(chat_id, ann, "new 1")
        first = lines.get(timeout=30)
        assert first.rstrip().endswith(f"{ann}: new 1"), first
        assert lines.empty()
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean exit
        assert proc.wait(timeout=30) == 0


def test_tail_refuses_a_non_member_at_once(concord_server, client, unique):
    target = concord_server.target
    chat_id = client.chat.create(f"{unique}-ann", [f"{unique}-bob"], "hello", chat_id=f"{unique}:chat")
    began = time.monotonic()
    stranger = run(target, "chat", "tail", chat_id, "--as", f"{unique}-eve")
    assert time.monotonic() - began < TIMEOUT / 2
    assert stranger.returncode == 1 and stranger.stderr.count("\n") == 1, stranger
    assert "NOT_A_MEMBER" in stranger.stderr and f"'{unique}-eve' is not a member of chat" in stranger.stderr
    nowhere = run(target, "chat", "tail", f"{unique}:none", "--as", f"{unique}-ann")
    assert nowhere.returncode == 1 and "does not exist" in nowhere.stderr and nowhere.stderr.count("\n") == 1
