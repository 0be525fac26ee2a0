"""The `concord` admin command, run as operators run it (the venv's entry point, a
subprocess) against a live server and checked through the Python client."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
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
