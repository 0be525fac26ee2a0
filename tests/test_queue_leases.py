"""What a lease means when a Consume stream ends, and a claim that fails halfway
(issue 30: a task leased twice after a Redis outage, tasks dead without a delivery).

A lease handed to the transport is the consumer's until it settles it or the lease
expires, whoever ends the stream; only the consumer's half-close gives back early.
Tasks leased for a stream but never sent go back at once, their attempt not counted.
A dequeue never leases more than fits in one reply."""

from __future__ import annotations

import asyncio
import queue as stdlib_queue
from collections.abc import AsyncIterator

import grpc
import pytest
import redis
from google.protobuf import duration_pb2

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from concord_server.api.consume import ConsumeStream
from concord_server.api.queue import task_message
from concord_server.primitives.queue import NewTask, Settling
from support import queue_primitive

LEASE_S = 60


@pytest.fixture
def stub(concord_server):
    with grpc.insecure_channel(concord_server.target) as ch:
        yield queue_pb2_grpc.QueueServiceStub(ch)


def _open(stub, queues: list[str], credits: int, first: list[pb.ConsumeRequest] = ()):
    requests: stdlib_queue.Queue = stdlib_queue.Queue()
    requests.put(pb.ConsumeRequest(start=pb.ConsumeStart(
        queues=queues, lease_ttl=duration_pb2.Duration(seconds=LEASE_S), credits=credits, batched=True)))
    call = stub.Consume(iter(requests.get, None), timeout=30)
    return requests, call, iter(call)


def _nobody_else_gets_it(client, queue: str) -> None:
    """A second consumer waiting a whole second gets nothing: the task is still leased.
    (Before the fix the server handed it back within milliseconds of the stream's end.)"""
    assert client.queue(queue).get(max_tasks=1, lease_ttl=5, timeout=1) == []


def _still_the_first_consumers(stub, task: pb.Task) -> None:
    """The first consumer, still working, settles by its lease after the stream ended."""
    stub.Ack(pb.AckRequest(queue=task.queue, task_id=task.task_id, lease=task.lease, result=b"done"))


def test_a_stream_the_server_ends_leaves_what_it_sent_leased_to_its_consumer(client, stub, name):
    client.queue(name).put("t", 1)
    requests, call, responses = _open(stub, [name], credits=1)
    (task,) = next(responses).tasks.tasks
    # A request the server rejects ends the stream from the server's side.
    bad = pb.Settle(queue=task.queue, task_id=task.task_id, lease=task.lease)
    requests.put(pb.ConsumeRequest(settles=pb.SettleBatch(settles=[bad] * 1001)))
    with pytest.raises(grpc.RpcError) as err:
        next(responses)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    requests.put(None)
    _nobody_else_gets_it(client, name)
    _still_the_first_consumers(stub, task)
    done = client.queue(name).get_task(task.task_id)
    assert (done.state, done.attempt, done.result) == ("succeeded", 1, b"done")


def test_a_broken_stream_leaves_what_it_sent_leased_to_its_consumer(client, stub, name):
    """A cancelled call (the client's process died, or its connection was cut) is not
    the consumer saying it is done: it may still be working on what it holds."""
    client.queue(name).put("t", 1)
    requests, call, responses = _open(stub, [name], credits=1)
    (task,) = next(responses).tasks.tasks
    call.cancel()
    requests.put(None)
    _nobody_else_gets_it(client, name)
    _still_the_first_consumers(stub, task)


def test_a_half_close_gives_back_what_the_consumer_still_holds_counted(client, stub, name):
    client.queue(name).put("t", 1)
    requests, call, responses = _open(stub, [name], credits=1)
    (task,) = next(responses).tasks.tasks
    requests.put(None)  # the consumer says it is done
    assert list(responses) == []
    again = client.queue(name).get(max_tasks=1, lease_ttl=5, timeout=5)
    assert [(t.task_id, t.attempt, t.last_error) for t in again] == [(task.task_id, 2, "consumer stream ended")]


async def _requests_that_never_end() -> AsyncIterator[pb.ConsumeRequest]:
    await asyncio.Event().wait()
    yield pb.ConsumeRequest()  # never reached


def _no_settles(settle: pb.Settle):
    raise AssertionError("this stream gets no settles")


async def test_tasks_leased_for_a_stream_but_never_sent_go_back_uncounted(redis_server, name):
    """Three tasks leased for an unbatched stream (three messages); the stream ends
    after the first is sent. The two unsent ones are ready again at once, attempt 0,
    and the sent one stays leased to its consumer (before: all three came back with
    an attempt counted, so max_attempts=1 tasks died never delivered)."""
    async with queue_primitive(redis_server.url) as queues:
        ids = [e.task_id for e in await queues.enqueue(name, [NewTask("t", max_attempts=1)] * 3)]
        stream = ConsumeStream(queues, [name], LEASE_S * 1000, 3, batched=False, max_batch=10,
                               read_settle=_no_settles,
                               encode=task_message)
        responses = stream.run(_requests_that_never_end())
        first = (await anext(responses)).task  # one dequeue leased all three, queued as three messages
        await responses.aclose()  # the stream ends with two tasks still queued for sending
        await queues.drain(5.0)
        states = {t: await queues.get_task(name, t) for t in ids}
        assert first.task_id == ids[0]
        assert (states[ids[0]].state, states[ids[0]].attempt, states[ids[0]].lease) == ("leased", 1, first.lease)
        for t in ids[1:]:
            assert (states[t].state, states[t].attempt, states[t].last_error) == ("ready", 0, "")


async def test_a_claim_that_fails_on_a_later_queue_hands_over_what_it_leased(redis_server, name):
    """Queue b's script fails (here its lanes set is the wrong type; on a cluster, a
    slot moving answers TRYAGAIN): queue a's task, already leased, is returned to the
    caller instead of being dropped to expire with an attempt counted."""
    a, b = f"{name}-a", f"{name}-b"
    async with queue_primitive(redis_server.url) as queues:
        (added,) = await queues.enqueue(a, [NewTask("t", max_attempts=1)])
        ready_b = queues._keys.queue(b).lanes
        with redis.Redis.from_url(redis_server.url) as r:
            r.set(ready_b, "not a sorted set")
            try:
                got = await queues.dequeue([a, b], 2, LEASE_S * 1000, 0)
                assert [t.task_id for t in got] == [added.task_id]
                (outcome,) = await queues.settle_many(a, [Settling(added.task_id, got[0].lease, "ack")])
                assert outcome.state == "succeeded"
                with pytest.raises(Exception):  # with nothing leased first, the failure is the answer
                    await queues.dequeue([b, a], 2, LEASE_S * 1000, 0)
            finally:
                r.delete(ready_b)


def test_a_dequeue_leases_no_more_than_fits_in_its_reply(client, name):
    """Ten 1 MiB tasks, max_tasks=10, 4 MiB messages: before, the server leased all ten,
    then failed RESOURCE_EXHAUSTED sending them, and they stayed leased to nobody."""
    q = client.queue(name)
    big = b"x" * (1024 * 1024 - 4096)
    for _ in range(10):
        q.put("big", big)
    got = q.get(max_tasks=10, lease_ttl=30)
    assert 1 <= len(got) < 10 and all(t.payload == big for t in got)
    stats = q.stats()
    assert (stats.leased, stats.ready) == (len(got), 10 - len(got))  # nothing leased beyond the reply
    for t in got:
        t.ack()
    peeked = client.queue(name).peek(limit=10)
    assert 1 <= len(peeked) < 10  # a page ends before it would not fit


def test_a_batched_stream_pushes_no_more_than_fits_in_a_message(client, stub, name):
    big = b"y" * (1024 * 1024 - 4096)
    for _ in range(6):
        client.queue(name).put("big", big)
    requests, call, responses = _open(stub, [name], credits=6)
    try:
        got: list[pb.Task] = []
        while len(got) < 6:
            batch = next(responses).tasks.tasks
            assert 1 <= len(batch) < 6
            got += batch
        assert sorted(t.payload for t in got) == [big] * 6
    finally:
        requests.put(None)
        call.cancel()
