"""The `concord` admin command, run as operators run it (the venv's entry point, a
subprocess) against a live server and checked through the Python client."""

from __future__ import annotations

import base64
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
from concord import admin
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


def test_search_finds_tasks_by_error_type_state_and_payload(concord_server, client, unique):
    target, q = concord_server.target, client.queue(f"{unique}:q")
    kept = q.put("report.build", b'{"customer": 7}')
    failed = q.put("report.mail", b'{"customer": 9}', max_attempts=1, priority=1)  # taken first
    [task] = q.get(lease_ttl=30)
    q.nack(task, "SMTP 550: mailbox unavailable")
    [found] = run_json(target, "queue", "search", f"{unique}:q", "--error", "MAILBOX")
    assert (found["task_id"], found["state"], found["last_error"]) == (failed, "TASK_STATE_DEAD",
                                                                       "SMTP 550: mailbox unavailable")
    table = run(target, "queue", "search", f"{unique}:q", "--state", "dead", "--type-prefix", "report.")
    assert table.returncode == 0 and failed in table.stdout and "mailbox unavailable" in table.stdout
    assert "1 found" in table.stdout and kept not in table.stdout
    assert [t["task_id"] for t in run_json(target, "queue", "search", f"{unique}:q", "--payload", '"customer": 7',
                                           "--type", "report.build")] == [kept]
    assert len(run_json(target, "queue", "search", f"{unique}:q", "--limit", "1")) == 1
    none = run(target, "queue", "search", f"{unique}:q", "--error", "no such text")
    assert none.returncode == 0 and "no task of" in none.stdout
    bad = run(target, "queue", "search", f"{unique}:q", "--type", "a", "--type-prefix", "b")
    assert bad.returncode == 1 and "type_prefix" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


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
    assert (missing.returncode, missing.stderr) == (
        1, f"concord: chat '{unique}:none' does not exist (CHAT_NOT_FOUND)\n")


def test_semaphore_set_limit_sets_the_only_limit_acquires_may_pass(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:sem"
    done = run(target, "semaphore", "set-limit", name, "3")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, f"semaphore '{name}': limit 3 (had none)", "")
    assert run_json(target, "semaphore", "set-limit", name, "5") == {"name": name, "limit": 5, "previous_limit": 3}
    described = run(target, "semaphore", "describe", name)
    assert described.stdout.strip() == f"semaphore '{name}' is not held (no holders, no waiters; limit 5)"
    with pytest.raises(concord.SemaphoreLimitMismatch):
        client.semaphore(name, limit=3).acquire()
    permit = client.semaphore(name).acquire()  # the stored 5
    assert permit is not None
    permit.release()
    for bad in ("0", "-1", "x"):  # usage errors: nothing sent
        refused = run(target, "semaphore", "set-limit", name, bad)
        assert refused.returncode == 2 and "LIMIT" in refused.stderr and "Traceback" not in refused.stderr, refused
    over = run(target, "semaphore", "set-limit", name, "10001")  # above the server's --max-semaphore-limit
    assert over.returncode == 1 and "limit" in over.stderr and "Traceback" not in over.stderr, over
    assert client.semaphore(name).describe().limit == 5


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


def test_task_shows_a_finished_task_with_its_result_and_progress(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:tq"
    q = client.queue(name)
    handle = q.put("resize", {"image": "cat.png"})
    [task] = q.get(lease_ttl=30)
    task.progress(0.5, {"rows": 10})
    task.ack({"width": 640, "ok": True})

    shown = run_json(target, "queue", "task", name, handle)
    assert (shown["task_id"], shown["state"], shown["attempt"], shown["result_type"]) == (
        handle, "TASK_STATE_SUCCEEDED", 1, "application/json")
    assert json.loads(base64.b64decode(shown["result"])) == {"width": 640, "ok": True}  # bytes: base64 in JSON
    assert shown["progress"]["value"] == 0.5 and json.loads(shown["progress"]["json"]) == {"rows": 10}
    assert {"enqueued_at", "leased_at", "finished_at"} <= shown.keys()

    table = run(target, "queue", "task", name, handle)
    assert table.returncode == 0, table.stderr
    head, fields = table.stdout.split("\n\n")
    assert head.splitlines()[0].split() == ["QUEUE", "TASK_ID", "TYPE", "STATE", "ATTEMPT", "MAX_ATTEMPTS", "PRIORITY"]
    assert head.splitlines()[1].split() == [name, handle, "resize", "succeeded", "1", "3", "0"]
    lines = dict(line.split(None, 1) for line in fields.splitlines())
    assert lines["result"] == '{"width":640,"ok":true}  (application/json)'
    assert lines["payload"] == '{"image":"cat.png"}'
    assert lines["progress"].startswith('0.5  {"rows":10}  (reported ')
    assert "finished_at" in lines and "dead_reason" not in lines


def test_task_shows_why_a_dead_task_died(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:tq"
    q = client.queue(name)
    handle = q.put("flaky", b"\x00\xff", max_attempts=1)
    [task] = q.get(lease_ttl=30)
    task.nack("it broke")
    table = run(target, "queue", "task", name, handle)
    assert table.returncode == 0, table.stderr
    lines = dict(line.split(None, 1) for line in table.stdout.split("\n\n")[1].splitlines())
    assert (lines["dead_reason"], lines["last_error"]) == ("attempts", "it broke")
    assert lines["payload"] == "2 bytes, base64 AP8=" and "result" not in lines


def test_wait_prints_the_outcome_and_exits_with_its_code(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:wq"
    q = client.queue(name)
    done, dead, cancelled, pending = (q.put("t", max_attempts=1) for _ in range(4))
    tasks = {t.task_id: t for t in q.get(3, lease_ttl=30)}
    tasks[done].ack("all good")
    tasks[dead].nack("no luck")
    tasks[cancelled].release()
    q.cancel(cancelled)

    succeeded = run(target, "queue", "wait", name, done)
    assert succeeded.returncode == 0, succeeded.stderr
    assert succeeded.stdout.startswith(f"task {done} of '{name}' succeeded\n")
    assert "all good  (text/plain; charset=utf-8)" in succeeded.stdout
    out = run(target, "--json", "queue", "wait", name, done)
    assert out.returncode == 0 and json.loads(out.stdout)["finished"] is True
    assert base64.b64decode(json.loads(out.stdout)["task"]["result"]) == b"all good"

    died = run(target, "queue", "wait", name, dead)
    assert (died.returncode, died.stderr) == (admin.WAIT_DEAD, ""), died
    assert died.stdout.startswith(f"task {dead} of '{name}' died (attempts): no luck\n")
    gone = run(target, "queue", "wait", name, cancelled)
    assert gone.returncode == admin.WAIT_CANCELLED and "was cancelled" in gone.stdout, gone
    waiting = run(target, "--json", "queue", "wait", name, pending, "--timeout", "0.2")
    assert waiting.returncode == admin.WAIT_NOT_FINISHED, waiting
    assert (json.loads(waiting.stdout)["finished"], json.loads(waiting.stdout)["task"]["state"]) == (
        False, "TASK_STATE_READY")


def test_wait_returns_when_a_worker_finishes_the_task(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:wq"
    q = client.queue(name)
    handle = q.put("t", {"n": 2})
    proc = subprocess.Popen([*COMMAND, "--target", target, "queue", "wait", name, handle, "--timeout", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        [task] = q.get(lease_ttl=30, timeout=10)
        task.progress(0.5)
        assert "waiting for task" in proc.stderr.readline()  # it looked: not finished, so it waits
        task.ack(task.json()["n"] * 21)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "succeeded" in out and "42  (application/json)" in out and "progress     0.5" in out


def test_wait_documents_its_exit_codes():
    shown = run("", "queue", "wait", "--help")
    assert shown.returncode == 0
    for code in (admin.WAIT_DEAD, admin.WAIT_CANCELLED, admin.WAIT_NOT_FINISHED):
        assert re.search(rf"^\s+{code}\s+\S", shown.stdout, re.M), shown.stdout


def test_unknown_task_is_an_error_of_one_line(concord_server, unique):
    for command in ("task", "wait"):
        missing = run(concord_server.target, "queue", command, f"{unique}:q", "no-such-task")
        assert missing.returncode == 1, missing
        assert missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr
        assert "no-such-task" in missing.stderr and missing.stdout == ""
    bad = run(concord_server.target, "queue", "wait", f"{unique}:q", "x", "--timeout", "-1")
    assert bad.returncode == 2 and "--timeout" in bad.stderr


def test_policy_set_then_show_round_trips_and_keeps_what_it_was_not_told(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:pq"
    q = client.queue(name)
    q.set_policy(retry=concord.RetryPolicy(max_attempts=5, backoff="fixed", initial_delay=2))
    default = run_json(target, "queue", "policy", name)
    assert default["succeeded"] == {"max_count": 1000, "max_age": "86400s"} and default["dead"] == {}

    set_ = run_json(target, "queue", "policy", name, "--keep-succeeded", "5", "--succeeded-for", "1h30m",
                    "--keep-dead", "7", "--dead-for", "2d")
    shown = run_json(target, "queue", "policy", name)
    assert set_ == shown
    assert (shown["succeeded"], shown["dead"]) == ({"max_count": 5, "max_age": "5400s"},
                                                  {"max_count": 7, "max_age": "172800s"})
    policy = q.policy()
    assert (policy.succeeded, policy.dead) == (concord.Retention(5, 5400.0), concord.Retention(7, 172800.0))
    assert (policy.retry.max_attempts, policy.retry.backoff, policy.retry.initial_delay) == (5, "fixed", 2.0)

    # One option changes one thing; "unlimited" lifts a limit.
    run_json(target, "queue", "policy", name, "--dead-for", "unlimited")
    run_json(target, "queue", "policy", name, "--keep-succeeded", "unlimited")
    policy = q.policy()
    assert (policy.succeeded, policy.dead) == (concord.Retention(None, 5400.0), concord.Retention(7, None))
    assert (policy.retry.max_attempts, policy.retry.backoff) == (5, "fixed")

    table = run(target, "queue", "policy", name)
    assert table.returncode == 0, table.stderr
    rows = [line.split("  ") for line in table.stdout.splitlines()]
    assert [[c.strip() for c in r if c.strip()] for r in rows[1:4]] == [
        ["FINISHED", "KEEP", "FOR"], ["succeeded, cancelled", "unlimited", "1h30m"], ["dead", "7", "unlimited"]]
    assert "fixed" in table.stdout and "2s" in table.stdout


def test_policy_refuses_bad_values(concord_server, unique):
    target = concord_server.target
    for option, value in [("--keep-dead", "-1"), ("--keep-dead", "many"), ("--dead-for", "soon"),
                          ("--succeeded-for", "-5m")]:
        bad = run(target, "queue", "policy", f"{unique}:pq", option, value)
        assert bad.returncode == 2 and option in bad.stderr, (option, value, bad)
    too_many = run(target, "queue", "policy", f"{unique}:pq", "--keep-succeeded", str(2**31))
    assert too_many.returncode == 1 and too_many.stderr.count("\n") == 1 and "Traceback" not in too_many.stderr


def test_describe_counts_finished_tasks(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:fq"
    q = client.queue(name)
    q.put("t")
    q.get(lease_ttl=30)[0].ack()
    stats = run_json(target, "queue", "describe", name)
    assert (stats["ready"], stats["finished"]) == (0, 1) and type(stats["finished"]) is int
    table = run(target, "queue", "describe", name).stdout.splitlines()
    assert "FINISHED" in table[0].split() and table[1].split()[table[0].split().index("FINISHED")] == "1"


def test_wait_interrupted_by_ctrl_c_is_not_success(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:wq"
    handle = client.queue(name).put("t")
    proc = subprocess.Popen([*COMMAND, "--target", target, "queue", "wait", name, handle],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "waiting for task" in proc.stderr.readline()  # it has looked: not finished
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == admin.WAIT_INTERRUPTED, (out, err)
    assert "Traceback" not in err


def test_schedules_are_created_listed_changed_and_deleted(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:sq"
    q = client.queue(name)
    assert run(target, "queue", "schedules", name).stdout == f"(no schedules in '{name}')\n"
    assert run_json(target, "queue", "schedules", name) == []

    made = run_json(target, "queue", "schedule", name, "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
                    "--type", "build_report", "--payload", '{"kind": "daily"}', "--missed", "skip", "--grace", "1m")
    assert (made["name"], made["spec"]["cron"], made["version"], made["runs"]) == ("nightly", "30 2 * * *", 1, 0)
    s = q.get_schedule("nightly")
    assert (s.cron, s.tz, s.type, s.json(), s.missed, s.grace, s.paused) == (
        "30 2 * * *", "Europe/Berlin", "build_report", {"kind": "daily"}, "skip", 60.0, False)
    beat = run(target, "queue", "schedule", name, "beat", "--every", "1")
    assert beat.returncode == 0 and beat.stdout.startswith(f"created schedule 'beat' of queue '{name}'\n"), beat
    held = run_json(target, "queue", "schedule", name, "held", "--every", "1h", "--paused")
    assert held["paused"] is True and "next_run_at" not in held
    assert q.get_schedule("held").type == "held", "the task type defaults to the schedule's name"
    wait_until(lambda: q.get_schedule("beat").runs >= 1, timeout=15, message="beat's first tick")

    table = run(target, "queue", "schedules", name)
    assert table.returncode == 0, table.stderr
    head, *rows = table.stdout.splitlines()
    assert head.split() == ["NAME", "WHEN", "NEXT_RUN", "LAST_RUN", "RUNS", "PAUSED"]
    assert [r.split()[0] for r in rows] == ["beat", "nightly", "held"], "soonest next run first, paused last"
    assert "30 2 * * * Europe/Berlin" in rows[1] and "every 1h" in rows[2] and "every 1s" in rows[0]
    assert rows[2].split()[-4:] == ["-", "-", "0", "yes"] and rows[1].split()[-3:] == ["-", "0", "no"]
    assert rows[0].split()[-3] != "-" and int(rows[0].split()[-2]) >= 1  # beat ran: last run, runs
    listed = run_json(target, "queue", "schedules", name)
    assert [s["name"] for s in listed] == ["beat", "nightly", "held"] and type(listed[0]["runs"]) is int

    exists = run(target, "queue", "schedule", name, "nightly", "--every", "5")
    assert exists.returncode == 1 and exists.stderr.count("\n") == 1 and "already" in exists.stderr, exists

    # --update changes what it names and keeps the rest.
    run_json(target, "queue", "schedule", name, "nightly", "--update", "--cron", "0 3 * * *")
    s = q.get_schedule("nightly")
    assert (s.cron, s.tz, s.type, s.json(), s.missed, s.grace, s.version) == (
        "0 3 * * *", "Europe/Berlin", "build_report", {"kind": "daily"}, "skip", 60.0, 2)
    run_json(target, "queue", "schedule", name, "held", "--update", "--payload", "x", "--priority", "5")
    s = q.get_schedule("held")
    assert (s.every, s.payload, s.priority, s.paused) == (3600.0, b"x", 5, True)
    run_json(target, "queue", "schedule", name, "beat", "--update", "--paused")
    assert q.get_schedule("beat").paused

    shown = run(target, "queue", "schedule", name, "nightly")
    assert shown.returncode == 0, shown.stderr
    head, fields = shown.stdout.split("\n\n")
    assert head.splitlines()[1].startswith("nightly") and "0 3 * * * Europe/Berlin" in head
    lines = dict(line.split(None, 1) for line in fields.splitlines())
    assert (lines["type"], lines["payload"], lines["missed"], lines["grace"], lines["version"]) == (
        "build_report", '{"kind": "daily"}', "skip", "1m", "2")
    assert run_json(target, "queue", "schedule", name, "nightly")["spec"]["time_zone"] == "Europe/Berlin"

    assert run_json(target, "queue", "schedule-pause", name, "nightly")["paused"] is True
    assert q.get_schedule("nightly").paused
    resumed = run(target, "queue", "schedule-resume", name, "nightly")
    assert resumed.returncode == 0 and "runs again" in resumed.stdout and not q.get_schedule("nightly").paused
    assert run_json(target, "queue", "schedule-delete", name, "nightly") == {"queue": name, "name": "nightly",
                                                                             "deleted": True}
    with pytest.raises(concord.ScheduleNotFound):
        q.get_schedule("nightly")
    for command in ("schedule", "schedule-pause", "schedule-resume", "schedule-delete"):
        missing = run(target, "queue", command, name, "nightly")
        assert missing.returncode == 1 and missing.stderr.count("\n") == 1, (command, missing)
        assert "has no schedule 'nightly'" in missing.stderr and "Traceback" not in missing.stderr


def test_schedule_refuses_bad_usage(concord_server, unique):
    target, name = concord_server.target, f"{unique}:sq"
    for args in (["--type", "t"], ["--paused"], ["--cron", "* * * * *", "--every", "5"], ["--update"],
                 ["--every", "soon"], ["--every", "5", "--missed", "sometimes"]):
        bad = run(target, "queue", "schedule", name, "s", *args)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, (args, bad)
    invalid = run(target, "queue", "schedule", name, "s", "--cron", "61 * * * *")
    assert invalid.returncode == 1 and invalid.stderr.count("\n") == 1 and "bad cron expression" in invalid.stderr, invalid
    assert run_json(target, "queue", "schedules", name) == []


def test_limit_set_show_check_and_reset(concord_server, unique):
    t = concord_server.target
    done = run(t, "limit", "show", unique)
    assert done.returncode != 0 and "has no stored rate limit" in done.stderr
    set_out = run(t, "limit", "set", unique, "2", "--per", "1m", "--algorithm", "fixed_window")
    assert set_out.returncode == 0, set_out.stderr
    assert "2 per 1m" in set_out.stdout and "fixed_window" in set_out.stdout and "was none" in set_out.stdout
    assert run_json(t, "limit", "show", unique)["rate"] == 2
    took = run(t, "limit", "check", unique, "--hits", "2")
    assert took.returncode == 0 and "2 allowed; 0 left" in took.stdout, took.stdout
    refused = run_json(t, "limit", "check", unique, "--hits", "1")
    assert refused.get("allowed", False) is False and "retry_after" in refused
    assert run(t, "limit", "reset", unique).returncode == 0
    assert "0 allowed; 2 left" in run(t, "limit", "check", unique).stdout


def test_limit_list_and_delete(concord_server, unique):
    t = concord_server.target
    assert run(t, "limit", "set", f"{unique}:a", "5", "--per", "1m", "--burst", "3").returncode == 0
    assert run(t, "limit", "set", f"{unique}:b", "2", "--algorithm", "concurrency").returncode == 0
    assert run(t, "limit", "check", f"{unique}:a", "--hits", "1").returncode == 0
    listed = {e["key"]: e for e in run_json(t, "limit", "list") if e["key"].startswith(unique)}
    assert sorted(listed) == [f"{unique}:a", f"{unique}:b"]
    assert (listed[f"{unique}:a"]["remaining"], listed[f"{unique}:a"]["limit"]["burst"]) == (2, 3)
    assert listed[f"{unique}:b"]["limit"]["algorithm"] == "ALGORITHM_CONCURRENCY"
    table = [line for line in run(t, "limit", "list").stdout.splitlines() if line.startswith(unique)]
    assert len(table) == 2 and "5 per 1m, burst 3 (gcra)" in table[0] and table[0].split()[-1] == "0"  # no waiters
    deleted = run(t, "limit", "delete", f"{unique}:a")
    assert deleted.returncode == 0 and "deleted (was 5 per 1m, burst 3" in deleted.stdout, deleted.stdout
    assert run_json(t, "limit", "delete", f"{unique}:a") == {"key": f"{unique}:a", "previous": None}
    assert [e["key"] for e in run_json(t, "limit", "list") if e["key"].startswith(unique)] == [f"{unique}:b"]


def test_describe_shows_each_group_with_its_rules_and_what_holds_it(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:gq"
    q = client.queue(name)
    q.set_group("vip", max_leased=1, weight=3, rate=concord.LeaseRate(10, 1.0))
    for group in ("vip", "vip", "free"):
        q.put("t", group=group)
    assert len(q.get(3)) == 2
    table = run(target, "queue", "describe", name).stdout.splitlines()
    header = next(i for i, line in enumerate(table) if line.startswith("GROUP"))
    rows = {line.split()[0]: line for line in table[header + 1:]}
    assert rows["vip"].split()[:5] == ["vip", "1", "1", "1", "3"] and "at cap" in rows["vip"]
    assert rows["free"].split()[:5] == ["free", "0", "1", "-", "1"]
    groups = {g["name"]: g for g in run_json(target, "queue", "describe", name)["groups"]}
    assert groups["vip"]["wait_reason"] == "WAIT_REASON_GROUP_AT_CAP"


def test_pausing_one_group_leaves_the_others(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:pg"
    assert run_json(target, "queue", "pause", name, "--group", "g") == {"queue": name, "group": "g", "paused": True,
                                                                        "was_paused": False}
    q = client.queue(name)
    q.put("t", group="g")
    other = q.put("t", group="h")
    assert [t.task_id for t in q.get(2)] == [other]
    assert "resumed" in run(target, "queue", "resume", name, "--group", "g").stdout
    assert len(q.get(2)) == 1


def _follow(proc: subprocess.Popen) -> queue.Queue:
    """The lines a command prints, as they come (get them with a deadline)."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    return lines


def test_election_leader_observe_and_resign(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:election"
    assert run_json(target, "election", "leader", name) == {"election": name, "leader": None, "candidates": 0}
    election = client.election(name, ttl=60, candidate="host-a")
    observer = subprocess.Popen([*COMMAND, "--target", target, "--json", "election", "observe", name],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    changes = _follow(observer)
    try:
        assert "observing election" in observer.stderr.readline()
        assert json.loads(changes.get(timeout=30))["leader"] is None  # nobody leads yet
        with pytest.raises(concord.LeadershipLost):
            with election.campaign(b"host-a:8080", timeout=30) as leadership:
                shown = run_json(target, "election", "leader", name)
                assert shown["leader"]["candidate"] == "host-a" and shown["leader"]["term"] == leadership.term
                assert base64.b64decode(shown["leader"]["value"]) == b"host-a:8080" and shown["candidates"] == 0
                table = run(target, "election", "leader", name)
                assert table.returncode == 0 and "host-a:8080" in table.stdout and str(leadership.term) in table.stdout
                elected = json.loads(changes.get(timeout=30))
                assert (elected["leader"]["candidate"], elected["leader"]["term"]) == ("host-a", leadership.term)
                leadership.proclaim(b"host-a:9090")
                proclaimed = json.loads(changes.get(timeout=30))
                assert base64.b64decode(proclaimed["leader"]["value"]) == b"host-a:9090"
                assert proclaimed["position"] > elected["position"]

                declined = run(target, "election", "resign", name, stdin="n\n")
                assert declined.returncode == 1 and "nothing changed" in declined.stderr and not leadership.lost
                resigned = run_json(target, "election", "resign", name, "--yes")
                assert resigned == {"election": name, "resigned": True, "term": leadership.term}
                assert leadership.wait_lost(30)  # its Lead stream was told
        assert json.loads(changes.get(timeout=30))["leader"] is None
        assert observer.poll() is None  # still following
    finally:
        observer.send_signal(signal.SIGINT)
        assert observer.wait(timeout=30) == 0  # Ctrl-C is the way to stop it
    nobody = run(target, "election", "resign", name, "--yes")
    assert (nobody.returncode, nobody.stdout.strip()) == (0, f"election '{name}' has no leader")

    # --count: the state now, then stops; --after resumes after a position printed before.
    [now] = [json.loads(line) for line in run(target, "--json", "election", "observe", name, "--count", "1")
             .stdout.splitlines()]
    assert now["leader"] is None
    again = run(target, "--json", "election", "observe", name, "--after", str(proclaimed["position"]), "--count", "1")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["leader"] is None and json.loads(again.stdout)["position"] > proclaimed["position"]


def test_election_campaign_runs_the_command_while_leading_and_exits_with_its_status(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:election"
    script = ("import os, sys, concord\n"
              "leader = concord.Client(sys.argv[1]).election(sys.argv[2]).leader()\n"
              "print(os.environ['CONCORD_ELECTION'], os.environ['CONCORD_ELECTION_TERM'], leader.term,\n"
              "      leader.candidate, leader.value.decode())\n"
              "sys.exit(7)\n")
    done = run(target, "election", "campaign", name, "host-a:8080", "--candidate", "host-a", "--ttl", "30s",
               "--", sys.executable, "-c", script, target, name)
    assert done.returncode == 7, done.stderr
    election, term, leader_term, candidate, value = done.stdout.split()
    assert (election, candidate, value) == (name, "host-a", "host-a:8080") and term == leader_term
    assert f"leading election '{name}', term {term}" in done.stderr
    assert client.election(name).leader() is None  # resigned before it exited

    ok = run(target, "election", "campaign", name, "v", "--", sys.executable, "-c", "pass")
    assert (ok.returncode, ok.stdout) == (0, ""), ok.stderr

    # Someone else leads: not elected within --timeout, the command never runs.
    with client.election(name, ttl=60, candidate="incumbent").campaign(b"x", timeout=30):
        late = run(target, "election", "campaign", name, "v", "--timeout", "200ms", "--", "echo", "ran")
        assert late.returncode == 1 and "ran" not in late.stdout
        assert late.stderr.strip().endswith("(ELECTION_WAIT_TIMEOUT)") and "Traceback" not in late.stderr, late

    missing = run(target, "election", "campaign", name, "v", "--", "/nonexistent/command")
    assert missing.returncode == 1 and "cannot run" in missing.stderr and "Traceback" not in missing.stderr
    assert client.election(name).leader() is None
    usage = run(target, "election", "campaign", name, "v")  # no command
    assert usage.returncode == 2


def test_election_campaign_terminates_the_command_when_leadership_is_lost(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:election"
    script = "import time; print('working', flush=True); time.sleep(120)"
    proc = subprocess.Popen([*COMMAND, "--target", target, "election", "campaign", name, "v", "--grace", "5s",
                             "--", sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "working\n"  # it leads, and its command runs
        term = client.election(name).leader().term
        assert run(target, "election", "resign", name, "--term", str(term), "--yes").returncode == 0
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert err.strip().splitlines()[-1] == (f"concord: leadership of election '{name}' (term {term}) was lost: "
                                            f"terminated {admin.election._command_text([sys.executable, '-c', script])} "
                                            "(NOT_LEADER)")
    assert "Traceback" not in err


def test_rwlock_describe_shows_holders_and_waiters_in_line(concord_server, client, unique):
    target, name = concord_server.target, f"{unique}:rw"
    idle = run(target, "rwlock", "describe", name)
    assert (idle.returncode, idle.stdout.strip()) == (0, f"rwlock '{name}' is not held (no writer, no readers, "
                                                         "no waiters)")
    readers = [client.rwlock(name, ttl=60, owner=f"reader-{i}").acquire("read") for i in (1, 2)]
    got: queue.Queue = queue.Queue()

    def wait_for(owner: str, mode: str) -> None:
        got.put(client.rwlock(name, ttl=60, owner=owner).acquire(mode, timeout=50))

    threads = [threading.Thread(target=wait_for, args=("writer-1", "write"))]
    threads[0].start()
    wait_until(lambda: len(client.rwlock(name).describe().waiters) == 1, timeout=30, message="the writer queued")
    threads.append(threading.Thread(target=wait_for, args=("reader-3", "read")))
    threads[1].start()
    wait_until(lambda: len(client.rwlock(name).describe().waiters) == 2, timeout=30, message="the reader queued")

    d = run_json(target, "rwlock", "describe", name)
    assert d["writer"] is None and [r["owner"] for r in d["readers"]] == ["reader-1", "reader-2"]
    assert [r["fencing_token"] for r in d["readers"]] == [lease.fencing_token for lease in readers]
    assert d["waiters"] == [{"owner": "writer-1", "mode": "MODE_WRITE"}, {"owner": "reader-3", "mode": "MODE_READ"}]
    table = run(target, "rwlock", "describe", name).stdout
    assert f"rwlock '{name}': held by 2 reader(s), 2 waiting" in table
    assert re.search(r"1\s+write\s+writer-1\n2\s+read\s+reader-3", table), table

    for lease in readers:
        lease.release()
    writer = got.get(timeout=50)
    d = run_json(target, "rwlock", "describe", name)
    assert (d["writer"]["owner"], d["writer"]["fencing_token"]) == ("writer-1", writer.fencing_token)
    assert d["readers"] == [] and d["waiters"] == [{"owner": "reader-3", "mode": "MODE_READ"}]
    writer.release()
    got.get(timeout=50).release()
    for t in threads:
        t.join(timeout=50)


def test_autocomplete_count_suggest_and_recent(concord_server, client, unique):
    target, index = concord_server.target, f"{unique}:people"
    client.autocomplete.add_names(index, [("Astrid", 5.0), ("Astor", 1.0), ("Bob", 0.0), "École"])
    assert run_json(target, "autocomplete", "count", index) == {"index": index, "prefix": "", "count": 4}
    assert run_json(target, "autocomplete", "count", index, "--prefix", "as")["count"] == 2
    assert run(target, "autocomplete", "count", index).stdout.strip() == f"index '{index}': 4 name(s)"

    by_name = run_json(target, "autocomplete", "suggest", index, "AS")
    assert [s["name"] for s in by_name["suggestions"]] == ["Astor", "Astrid"] and by_name["truncated"] is False
    best = run_json(target, "autocomplete", "suggest", index, "", "--by-score", "--limit", "1")
    assert best["suggestions"] == [{"name": "Astrid", "score": 5.0}]
    assert "École" in run(target, "autocomplete", "suggest", index, "éc").stdout
    none = run(target, "autocomplete", "suggest", index, "zz")
    assert (none.returncode, none.stdout.strip()) == (0, f"(no names in '{index}' start with 'zz')")

    user = f"{unique}-ann"
    for contact in ("Thomas Müller", "Tina", "Bert"):
        client.autocomplete.add_recent(user, contact)
    assert run_json(target, "autocomplete", "recent", user, "t")["contacts"] == ["Tina", "Thomas Müller"]
    assert run(target, "autocomplete", "recent", user).stdout.splitlines() == ["Bert", "Tina", "Thomas Müller"]


def test_files_describe_shows_bytes_held_and_what_each_worker_has_left(concord_server, client, unique):
    target, ann = concord_server.target, f"{unique}-ann"
    group = client.chat.create(ann, [f"{unique}-w1", f"{unique}-w2"], "logs follow", chat_id=f"{unique}:logs")
    assert run(target, "files", "describe", group).stdout.strip() == f"group '{group}' holds no files"
    first = client.files.upload([b"first\nsecond\n"], group, sender=ann, name="a.log")
    second = client.files.upload([b"x" * 1000], group, sender=ann, name="b.log")
    client.files.mark_done(first.file_id, f"{unique}-w1")
    assert b"".join(d for d, _ in client.files.chunks(second.file_id, worker=f"{unique}-w2")) == b"x" * 1000

    d = run_json(target, "files", "describe", group)
    assert d["held_bytes"] == first.size + second.size == 1013
    assert d["bound_bytes"] == 64 * 1024 * 1024  # the server's --file-group-bound (default)
    assert [(f["name"], f["size"], f["state"], sorted(f["pending"])) for f in d["files"]] == [
        ("a.log", 13, "FILE_STATE_COMPLETE", [f"{unique}-w2"]),
        ("b.log", 1000, "FILE_STATE_COMPLETE", [f"{unique}-w1", f"{unique}-w2"])]
    noted = d["workers"][1]["downloads"][0]
    assert noted.pop("updated_at").endswith("Z")
    assert d["workers"] == [
        {"worker": f"{unique}-w1", "pending_files": 1, "pending_bytes": 1000, "downloads": []},
        {"worker": f"{unique}-w2", "pending_files": 2, "pending_bytes": 1013, "downloads": [
            {"file_id": second.file_id, "name": "b.log", "offset": 1000, "lines": False, "size": 1000,
             "read": "100%"}]}]
    assert [dl["worker"] for dl in d["files"][1]["downloads"]] == [f"{unique}-w2"]
    table = run(target, "files", "describe", group).stdout
    assert f"group '{group}': 2 file(s), 1013 bytes held" in table
    assert re.search(rf"{unique}-w2\s+2\s+1013", table), table
    assert re.search(rf"{unique}-w2\s+{re.escape(second.file_id)}\s+b\.log\s+1000\s+100%", table), table
    client.files.mark_done(second.file_id, f"{unique}-w2")
    assert "downloads, as the server last noted them" not in run(target, "files", "describe", group).stdout


def test_rwlock_election_autocomplete_and_files_list(concord_server, client, unique):
    """`concord rwlock|election|autocomplete|files list`: every resource of the kind,
    as a table or --json, and one that is gone is not shown."""
    target, ann = concord_server.target, f"{unique}-ann"
    writer = client.rwlock(f"{unique}:w", ttl=60, owner="the-writer").acquire("write")
    reader = client.rwlock(f"{unique}:r", ttl=60).acquire("read")
    won = client.election(f"{unique}:e", ttl=60, candidate="alice").elect(b"10.0.0.1:80")
    client.autocomplete.add_names(f"{unique}:idx", ["Åsa", "Bo"])
    group = client.chat.create(ann, [f"{unique}-w"], "logs", chat_id=f"{unique}:logs")
    up = client.files.upload([b"x" * 100], group, sender=ann, name="a.log")

    def mine(rows: list[dict], key: str) -> list[dict]:
        return [r for r in rows if r[key].startswith(unique)]

    rw = mine(run_json(target, "rwlock", "list"), "name")
    assert [(r["name"], r["readers"], r["waiters"]) for r in rw] == [(f"{unique}:r", 1, 0), (f"{unique}:w", 0, 0)]
    assert rw[0]["writer"] is None
    assert (rw[1]["writer"]["owner"], rw[1]["writer"]["fencing_token"]) == ("the-writer", writer.fencing_token)
    assert re.search(rf"{re.escape(unique)}:w\s+the-writer\s+{writer.fencing_token}\s", run(target, "rwlock", "list").stdout)

    [e] = mine(run_json(target, "election", "list"), "election")
    assert (e["leader"]["candidate"], e["leader"]["term"], e["candidates"]) == ("alice", won.term, 0)
    assert base64.b64decode(e["leader"]["value"]) == b"10.0.0.1:80" and e["value_truncated"] is False
    assert re.search(rf"{re.escape(unique)}:e\s+alice\s+{won.term}\s", run(target, "election", "list").stdout)

    assert mine(run_json(target, "autocomplete", "list"), "index") == [{"index": f"{unique}:idx", "size": 2}]
    assert re.search(rf"{re.escape(unique)}:idx\s+2$", run(target, "autocomplete", "list").stdout, re.M)

    assert mine(run_json(target, "files", "list"), "group") == [
        {"group": group, "files": 1, "held_bytes": 100, "bound_bytes": 64 * 1024 * 1024}]
    assert re.search(rf"{re.escape(group)}\s+1\s+100\s+67108864", run(target, "files", "list").stdout)

    # Gone: no longer listed.
    client.rwlock(f"{unique}:w").release(writer)
    client.rwlock(f"{unique}:r").release(reader)
    client.election(f"{unique}:e").resign(won.term)
    client.autocomplete.remove_names(f"{unique}:idx", ["Åsa", "Bo"])
    client.files.mark_done(up.file_id, f"{unique}-w")
    assert not mine(run_json(target, "rwlock", "list"), "name")
    assert not mine(run_json(target, "election", "list"), "election")
    assert not mine(run_json(target, "autocomplete", "list"), "index")
    assert not mine(run_json(target, "files", "list"), "group")


@pytest.mark.parametrize("command", [
    ["election", "leader", ""], ["election", "observe", ""], ["election", "resign", "", "--yes"],
    ["election", "campaign", "", "v", "--", "echo", "ran"], ["rwlock", "describe", ""],
    ["autocomplete", "count", ""], ["autocomplete", "suggest", "", "a"], ["autocomplete", "recent", ""],
    ["files", "describe", ""]])
def test_new_commands_refuse_a_bad_name_in_one_line(concord_server, command):
    done = run(concord_server.target, *command)
    assert (done.returncode, done.stdout) == (1, ""), done
    assert done.stderr.startswith("concord: ") and done.stderr.endswith(" must not be empty (INVALID_ARGUMENT)\n")
    assert done.stderr.count("\n") == 1, done.stderr
