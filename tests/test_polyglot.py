"""Concord from Go and Node: their clients' own test suites against a live server,
the committed Go stubs' freshness, and scenarios where Go or Node and Python share
a lock, a queue and a chat.

The toolchains come from `make tools` (part of `make test`): Go tools in .tools/bin,
Node modules in clients/node/node_modules. A developer without Go or Node gets
skips that say so; under CI=true a missing tool fails instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

import concord
from support import wait_until, worker_running

ROOT = Path(__file__).resolve().parents[1]
TOOLS_BIN = ROOT / ".tools" / "bin"
GO_CLIENT = ROOT / "clients" / "go"
NODE_CLIENT = ROOT / "clients" / "node"
BUF = Path(sys.executable).parent / "buf"


def require(path: str | Path | None, what: str, how: str = "`make tools` installs it; `make test` runs that") -> str:
    """path if the tool is there; otherwise skip, or fail under CI (which must run these tests)."""
    if path is not None and Path(path).exists():
        return str(path)
    reason = f"{what} is not installed ({how})"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run this test")
    pytest.skip(reason)


def go() -> str:
    return require(shutil.which("go") or "/usr/local/go/bin/go", "Go")


def tool(name: str) -> str:
    """A Go tool `make tools` installed into .tools/bin (grpcurl, protoc-gen-go...)."""
    go()
    return require(TOOLS_BIN / name, name)


def node() -> str:
    path = require(shutil.which("node"), "Node")
    require(NODE_CLIENT / "node_modules" / ".installed", "clients/node's modules")
    return path


def run(args: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    """Runs a command to completion and returns its output; fails the test with
    that output when it exits non-zero or outlives timeout (its whole process
    group is killed then: `go test` runs the test binary as a child)."""
    proc = subprocess.Popen(args, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(args)} took over {timeout}s:\n{out}")
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {proc.returncode}:\n{out}")
    return out


def test_committed_go_stubs_are_fresh(tmp_path):
    path = f"{Path(tool('protoc-gen-go')).parent}{os.pathsep}{os.environ['PATH']}"
    tool("protoc-gen-go-grpc")
    run([str(BUF), "generate", "-o", str(tmp_path)], cwd=GO_CLIENT, env={"PATH": path}, timeout=60)

    def tree(root: Path) -> dict[Path, bytes]:
        return {p.relative_to(root): p.read_bytes() for p in (root / "gen").rglob("*") if p.is_file()}

    fresh, committed = tree(tmp_path), tree(GO_CLIENT)
    assert fresh, "buf generate wrote no Go stubs"
    stale = sorted(str(p) for p in fresh.keys() | committed.keys() if fresh.get(p) != committed.get(p))
    assert not stale, f"stale or extra Go stubs in clients/go (run `make proto`): {stale}"


@pytest.mark.timeout(300)
def test_go_client_suite(concord_server):
    """go vet, then `go test` against the live server."""
    go_ = go()
    run([go_, "vet", "./..."], cwd=GO_CLIENT, timeout=120)
    run([go_, "test", "-count=1", "-timeout=120s", "./..."], cwd=GO_CLIENT,
        env={"CONCORD_ADDR": concord_server.target}, timeout=240)


@pytest.mark.timeout(180)
def test_node_client_suite(concord_server):
    out = run([node(), "--test"], cwd=NODE_CLIENT, env={"CONCORD_ADDR": concord_server.target}, timeout=120)
    assert re.search(r"^# pass [1-9]", out, re.M) and re.search(r"^# fail 0$", out, re.M), out


@pytest.fixture(scope="session")
def go_examples(tmp_path_factory) -> dict[str, str]:
    """The Go example programs, built once: name -> binary."""
    out = tmp_path_factory.mktemp("go-examples")
    run([go(), "build", "-o", str(out), "./examples/..."], cwd=GO_CLIENT, timeout=110)
    return {p.name: str(p) for p in out.iterdir()}


@pytest.fixture
def go_lock_holder(go_examples, concord_server, name):
    """Starts the Go lock example holding `name` (TTL 2 s); yields (process, fencing token)."""
    proc = subprocess.Popen([go_examples["lock"], "-addr", concord_server.target, "-name", name, "-ttl", "2s",
                             "-owner", "go"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # its stderr, if it failed, is in the captured output
        assert line.split()[:2] == ["acquired", name], f"the Go example did not take the lock: {line!r}"
        yield proc, int(line.split()[2])
    finally:
        proc.kill()
        proc.wait()


def test_python_gets_the_lock_when_go_releases_it(client, name, go_lock_holder):
    go_proc, go_token = go_lock_holder
    lock = client.lock(name, ttl=5, timeout=30)
    got: dict[str, int] = {}

    def wait_for_it():
        with lock as lease:
            got["token"] = lease.fencing_token

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    first = wait_until(lambda: (info := lock.describe()).waiters == 1 and info, message="Python queued for the lock")
    # Go holds on past the expiry it had when Python queued: its lease renews itself
    # (a refresh sent after that expiry moves it more than one 2 s TTL further).
    wait_until(lambda: lock.describe().expires_at > first.expires_at + timedelta(seconds=2),
               message="Go's lease renewed past its first expiry")
    info = lock.describe()
    assert (info.held, info.owner, info.fencing_token, info.waiters) == (True, "go", go_token, 1)
    assert waiter.is_alive() and not got

    go_proc.stdin.write("\n")  # tells the example to Unlock
    go_proc.stdin.flush()
    waiter.join(10)
    assert not waiter.is_alive() and got["token"] > go_token
    assert go_proc.wait(10) == 0
    assert go_proc.stdout.read().split() == ["released", name]


def test_python_leads_at_once_when_the_go_leader_dies(client, name, go_examples, concord_server):
    """The Go election example leads on a Lead stream; killed, its stream ends and the
    Python candidate queued behind it leads long before the Go leadership's 30 s TTL."""
    from concord.election.v1 import election_pb2

    go_proc = subprocess.Popen([go_examples["election"], "-addr", concord_server.target, "-name", name, "-ttl", "30s",
                                "-candidate", "go", "-value", "10.0.0.7:8080"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = go_proc.stdout.readline()  # its stderr, if it failed, is in the captured output
        assert line.split()[:2] == ["elected", name], f"the Go example was not elected: {line!r}"
        go_term = int(line.split()[2])
        election = client.election(name, ttl=30, candidate="py")
        leader = election.leader()
        assert (leader.candidate, leader.value, leader.term) == ("go", b"10.0.0.7:8080", go_term)

        won: list[concord.Leadership | None] = []
        waiter = threading.Thread(target=lambda: won.append(election.elect(b"py", timeout=30)))
        waiter.start()
        wait_until(lambda: client._service("election").call_safe(
            "Leader", election_pb2.LeaderRequest(election=name)).candidates == 1, message="Python queued")
        go_proc.kill()
        waiter.join(10)  # far less than the 30 s TTL: the dead leader's stream ended, which resigned
        assert not waiter.is_alive() and won[0] is not None and won[0].term > go_term
        assert election.leader().candidate == "py"
        election.resign(won[0].term)
    finally:
        go_proc.kill()
        go_proc.wait()


def test_python_worker_runs_tasks_a_node_producer_enqueued(client, name, concord_server):
    payloads = [{"n": i, "to": f"user{i}@example.com"} for i in range(20)]
    out = run([node(), "examples/producer.js", "--addr", concord_server.target, name, "send_welcome",
               *map(json.dumps, payloads)], cwd=NODE_CLIENT, timeout=60)
    ids = out.split()
    assert len(ids) == len(payloads)

    worker = concord.Worker(client, [name], concurrency=4)
    done: list[tuple[str, dict]] = []

    @worker.task("send_welcome")
    def send_welcome(task):
        done.append((task.task_id, task.json()))

    with worker_running(worker):
        wait_until(lambda: len(done) >= len(payloads), message="the worker to run every task")
    assert sorted(done, key=lambda d: d[1]["n"]) == list(zip(ids, payloads))
    stats = client.queue(name).stats()
    assert (stats.ready, stats.leased, stats.dead) == (0, 0, 0)


def test_python_subscriber_gets_a_go_members_messages_in_order(client, go_examples, concord_server):
    py, gopher = f"py-{uuid.uuid4().hex[:8]}", f"go-{uuid.uuid4().hex[:8]}"
    chat_id = client.chat.create(py, [gopher], "welcome")
    bodies = [f"message {i}" for i in range(25)]

    with client.chat.subscribe(py) as feed, ThreadPoolExecutor(1) as pool:
        def go_sends() -> str:  # once the subscription is live, so the messages arrive live
            assert feed.wait_caught_up(10), "the subscription never caught up"
            return run([go_examples["chat"], "-addr", concord_server.target, "-chat", chat_id, "-sender", gopher,
                        *bodies], cwd=GO_CLIENT, timeout=60)

        sending = pool.submit(go_sends)
        sending.add_done_callback(lambda f: f.exception() and feed.close())  # a failure ends the wait below
        received = []
        for item in feed:
            if getattr(item, "sender", None) == gopher:
                received.append(item)
            if len(received) == len(bodies):
                break
        sent_ids = [int(i) for i in sending.result().split()]
    assert [(m.chat_id, m.body) for m in received] == [(chat_id, b) for b in bodies]
    assert [m.message_id for m in received] == sent_ids == sorted(sent_ids)
