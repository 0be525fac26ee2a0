"""Batched Consume streams (ConsumeStart.batched, SettleBatch) through the raw stub,
and the Worker that runs on them, through a server killed under it."""

from __future__ import annotations

import queue as stdlib_queue
import threading
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import duration_pb2

import concord
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from support import ServerProcess, error_info, unless_unavailable, wait_until, worker_running


@pytest.fixture
def stub(concord_server):
    with grpc.insecure_channel(concord_server.target) as ch:
        yield queue_pb2_grpc.QueueServiceStub(ch)


class Stream:
    """A raw Consume call whose requests are fed from the test."""

    def __init__(self, stub, queues: list[str], credits: int, *, batched: bool = True) -> None:
        self._requests: stdlib_queue.Queue = stdlib_queue.Queue()
        self._requests.put(pb.ConsumeRequest(start=pb.ConsumeStart(
            queues=queues, lease_ttl=duration_pb2.Duration(seconds=60), credits=credits, batched=batched)))
        self.call = stub.Consume(iter(self._requests.get, None), timeout=30)
        self.responses: Iterator[pb.ConsumeResponse] = iter(self.call)

    def send(self, request: pb.ConsumeRequest) -> None:
        self._requests.put(request)

    def next(self) -> pb.ConsumeResponse:
        return next(self.responses)

    def close(self) -> None:
        self._requests.put(None)


def settle(task: pb.Task, *, lease: str | None = None, failed: bool = False, queue: str | None = None) -> pb.Settle:
    return pb.Settle(queue=task.queue if queue is None else queue, task_id=task.task_id,
                     lease=task.lease if lease is None else lease, failed=failed, result=b"r" if not failed else b"",
                     error="boom" if failed else "", retry_delay=duration_pb2.Duration() if failed else None)


def test_a_batched_stream_pushes_what_one_dequeue_leased_as_one_message_within_credits(client, stub, name):
    client.queue(name).put_many([concord.NewTask("t", i) for i in range(10)])
    stream = Stream(stub, [name], credits=4)
    try:
        first = stream.next()
        assert first.WhichOneof("kind") == "tasks" and len(first.tasks.tasks) == 4
        assert client.queue(name).stats().leased == 4  # never more than the credits granted
        assert [t.payload for t in first.tasks.tasks] == [b"0", b"1", b"2", b"3"]  # FIFO
    finally:
        stream.close()
        stream.call.cancel()


def test_a_settle_batch_answers_each_settle_in_order_then_grants_its_credit(client, stub, name):
    """Acks, a nack, a stale lease and a bad queue name in one batch: each gets its
    own answer and outcome; the credit comes after, and the server pushes that many."""
    q = client.queue(name)
    q.put_many([concord.NewTask("t", i) for i in range(8)])
    stream = Stream(stub, [name], credits=4)
    try:
        tasks = list(stream.next().tasks.tasks)
        assert len(tasks) == 4
        stream.send(pb.ConsumeRequest(settles=pb.SettleBatch(settles=[
            settle(tasks[0]), settle(tasks[1], failed=True), settle(tasks[2], lease="0123456789abcdef.1"),
            settle(tasks[3], queue="bad\nname"), settle(tasks[0])], credit=3)))
        answer = stream.next()
        assert answer.WhichOneof("kind") == "settled_batch"
        got = [(s.task_id, s.error_reason) for s in answer.settled_batch.settled]
        assert got == [(tasks[0].task_id, ""), (tasks[1].task_id, ""), (tasks[2].task_id, "TASK_LEASE_NOT_HELD"),
                       (tasks[3].task_id, "INVALID_ARGUMENT"), (tasks[0].task_id, "TASK_LEASE_NOT_HELD")]
        assert q.get_task(tasks[0].task_id).state == "succeeded" and q.get_task(tasks[0].task_id).result == b"r"
        nacked = q.get_task(tasks[1].task_id)
        assert nacked.last_error == "boom" and nacked.state in ("ready", "leased")
        assert q.get_task(tasks[2].task_id).state == "leased"  # the stale lease changed nothing
        pushed: list[pb.Task] = []
        while len(pushed) < 3:
            m = stream.next()
            assert m.WhichOneof("kind") == "tasks"
            pushed += m.tasks.tasks
        assert len(pushed) == 3
        assert q.stats().leased == 2 + 3  # tasks[2], tasks[3] still held; three more for the credit
    finally:
        stream.close()
        stream.call.cancel()


def test_settle_batches_sent_back_to_back_are_settled_and_answered_in_order(client, stub, name):
    """Three batches sent at once, without waiting for answers, the second
    acking a task the first already acked, the third half-closing the stream. Each
    is answered in the order sent, and the half-close waits for all three answers."""
    q = client.queue(name)
    q.put_many([concord.NewTask("t", i) for i in range(6)])
    stream = Stream(stub, [name], credits=6)
    try:
        tasks: list[pb.Task] = []
        while len(tasks) < 6:
            tasks += stream.next().tasks.tasks
        batches = [[settle(t) for t in tasks[:3]], [settle(tasks[0]), *map(settle, tasks[3:5])], [settle(tasks[5])]]
        for b in batches:
            stream.send(pb.ConsumeRequest(settles=pb.SettleBatch(settles=b)))
        stream.close()
        answers = [[(s.task_id, s.error_reason) for s in stream.next().settled_batch.settled] for _ in batches]
        assert answers == [[(t.task_id, "") for t in tasks[:3]],
                           [(tasks[0].task_id, "TASK_LEASE_NOT_HELD"), *((t.task_id, "") for t in tasks[3:5])],
                           [(tasks[5].task_id, "")]]
        assert q.stats().finished == 6
    finally:
        stream.call.cancel()


def test_a_settle_batch_may_span_queues(client, stub, name):
    a, b = client.queue(name + "-a"), client.queue(name + "-b")
    a.put("t", 1)
    b.put("t", 2)
    stream = Stream(stub, [name + "-a", name + "-b"], credits=2)
    try:
        tasks: list[pb.Task] = []
        while len(tasks) < 2:
            tasks += stream.next().tasks.tasks
        stream.send(pb.ConsumeRequest(settles=pb.SettleBatch(settles=[settle(t) for t in tasks])))
        assert [s.error_reason for s in stream.next().settled_batch.settled] == ["", ""]
        assert a.stats().finished == 1 and b.stats().finished == 1
    finally:
        stream.close()
        stream.call.cancel()


def test_an_unbatched_stream_still_gets_one_task_per_message(client, stub, name):
    client.queue(name).put_many([concord.NewTask("t", i) for i in range(3)])
    stream = Stream(stub, [name], credits=3, batched=False)
    try:
        kinds = [stream.next().WhichOneof("kind") for _ in range(3)]
        assert kinds == ["task"] * 3
    finally:
        stream.close()
        stream.call.cancel()


def test_a_worker_whose_server_is_killed_reconnects_and_every_task_runs(redis_server, tmp_path, name):
    """SIGKILL under a busy Worker, then a new server on the same port: tasks it was
    running are settled when their stream is gone, the leases of the rest run out,
    and every task succeeds; none is lost."""
    doomed = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "first.log")
    again: ServerProcess | None = None
    seen: set[int] = set()
    release = threading.Event()
    with concord.Client(doomed.target, timeout=5) as client:
        q = client.queue(name)
        ids = {r.task_id for r in q.put_many([concord.NewTask("t", i) for i in range(60)])}
        worker = concord.Worker(client, [name], concurrency=4, lease_ttl=2)

        @worker.task("t")
        def run(task: concord.Task) -> None:
            seen.add(task.json())
            if len(seen) > 10:
                release.wait(10)  # hold some tasks while the server dies

        runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
        runner.start()
        try:
            wait_until(lambda: len(seen) > 10, message="worker busy")
            doomed.kill()
            again = ServerProcess("--redis-url", redis_server.url, port=doomed.port).start(tmp_path / "second.log")
            release.set()
            wait_until(lambda: getattr(unless_unavailable(q.stats), "finished", 0) == 60, timeout=60,
                       message="every task succeeded")
            assert {q.get_task(i).state for i in ids} == {"succeeded"}
            assert seen == set(range(60))
        finally:
            release.set()
            worker.stop()
            runner.join(30)
            if again is not None:
                again.stop()
            doomed.kill()
    assert not runner.is_alive()


def test_tasks_fetched_ahead_go_back_unstarted_when_the_worker_stops(client, name):
    q = client.queue(name)
    ids = [r.task_id for r in q.put_many([concord.NewTask("t", i) for i in range(6)])]
    started: list[int] = []
    hold = threading.Event()
    worker = concord.Worker(client, [name], concurrency=1, prefetch=3)

    @worker.task("t")
    def run(task: concord.Task) -> None:
        started.append(task.json())
        hold.wait(10)

    runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    runner.start()
    try:
        wait_until(lambda: started == [0] and q.stats().leased == 4, message="one running, three fetched ahead")
        worker.stop()
        hold.set()
        runner.join(30)
        assert not runner.is_alive()
    finally:
        hold.set()
        worker.stop()
        runner.join(30)
    assert started == [0]
    assert q.get_task(ids[0]).state == "succeeded"
    for task_id in ids[1:4]:  # handed back, their attempt not counted
        t = q.get_task(task_id)
        assert (t.state, t.attempt) == ("ready", 0)
    stats = q.stats()
    assert (stats.ready, stats.leased, stats.finished) == (5, 0, 1)


def test_a_release_settle_hands_the_task_back_unstarted(client, stub, name):
    q = client.queue(name)
    q.put("t", 1)
    stream = Stream(stub, [name], credits=1)
    try:
        (task,) = stream.next().tasks.tasks
        release = pb.Settle(queue=task.queue, task_id=task.task_id, lease=task.lease, release=True, failed=True)
        stream.send(pb.ConsumeRequest(settles=pb.SettleBatch(settles=[release])))
        assert [s.error_reason for s in stream.next().settled_batch.settled] == [""]
        back = q.get_task(task.task_id)
        assert (back.state, back.attempt, back.last_error) == ("ready", 0, "")  # not counted, not failed
    finally:
        stream.close()
        stream.call.cancel()


def test_a_worker_with_prefetch_0_holds_no_more_tasks_than_its_threads(client, name):
    q = client.queue(name)
    q.put_many([concord.NewTask("t", i) for i in range(12)])
    leased: list[int] = []
    worker = concord.Worker(client, [name], concurrency=2, prefetch=0)

    @worker.task("t")
    def run(task: concord.Task) -> None:
        leased.append(q.stats().leased)

    with worker_running(worker):
        wait_until(lambda: worker.processed == 12, message="all tasks run")
    assert len(leased) == 12 and max(leased) <= 2
