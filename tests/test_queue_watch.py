"""WatchQueue: task events in order, from any replica, resumable, with explicit gaps."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import grpc
import pytest

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from concord_server.primitives.queue import CAUGHT_UP, GAP, NewTask, Policy
from support import queue_primitive


@pytest.fixture
def prefix() -> str:
    return f"w{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def queues(redis_server, prefix):
    async with queue_primitive(redis_server.url, prefix=prefix) as queues:
        yield queues


@pytest.fixture
async def replica(redis_server, prefix):
    """Another server's primitive on the same keys: its own connections and bus."""
    async with queue_primitive(redis_server.url, prefix=prefix) as queues:
        yield queues


class Watcher:
    """Collects a watch's events in the background."""

    def __init__(self, queues, queue, after=None, from_oldest=False) -> None:
        self.events = []
        self._stream = queues.watch(queue, after, from_oldest)
        self._task = None

    async def __aenter__(self):
        self._task = asyncio.create_task(self._collect())
        return self

    async def _collect(self):
        async for e in self._stream:
            self.events.append(e)

    async def until(self, predicate, timeout=10.0):
        async with asyncio.timeout(timeout):
            while not predicate(self.events):
                if self._task.done():
                    self._task.result()  # the watch failed: raise its error
                    raise AssertionError("the watch ended")
                await asyncio.sleep(0.005)

    async def __aexit__(self, *exc):
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._stream.aclose()


def kinds(events, task_id=None):
    return [e.kind for e in events if task_id is None or e.task_id == task_id]


def tasks_only(events):
    return [e for e in events if e.task_id]


async def test_every_transition_is_an_event_in_order_seen_from_another_replica(queues, replica, name):
    async with Watcher(replica, name, from_oldest=True) as w:
        (a,) = await queues.enqueue(name, [NewTask("send", max_attempts=2)])
        (t,) = await queues.dequeue([name], 1, 60_000, 0)
        await queues.progress(name, t.task_id, t.lease, 0.5, '{"step": 1}', None)
        await queues.nack(name, t.task_id, t.lease, 0, "boom")
        (t,) = await queues.dequeue([name], 1, 60_000, 0)
        await queues.release(name, t.task_id, t.lease)
        (t,) = await queues.dequeue([name], 1, 60_000, 0)
        await queues.nack(name, t.task_id, t.lease, 0, "again")
        await queues.retry_dead(name, [a.task_id], 10)
        (t,) = await queues.dequeue([name], 1, 60_000, 0)
        await queues.ack(name, t.task_id, t.lease, b"r")
        (b,) = await queues.enqueue(name, [NewTask("other", delay_ms=60_000)])
        await queues.cancel(name, b.task_id)
        await w.until(lambda ev: "cancelled" in kinds(ev))
    assert kinds(w.events, a.task_id) == ["enqueued", "leased", "progress", "failed", "leased", "released", "leased",
                                          "dead", "retried", "leased", "succeeded"]
    assert kinds(w.events, b.task_id) == ["enqueued", "cancelled"]
    positions = [e.position for e in tasks_only(w.events)]
    assert positions == list(range(positions[0], positions[0] + len(positions))), "numbered without holes"
    by_kind = {e.kind: e for e in w.events if e.task_id == a.task_id}
    assert (by_kind["enqueued"].type, by_kind["failed"].error, by_kind["failed"].attempt) == ("send", "boom", 1)
    assert (by_kind["dead"].error, by_kind["dead"].dead_reason, by_kind["dead"].attempt) == ("again", "attempts", 2)
    assert by_kind["progress"].progress.value == 0.5 and by_kind["progress"].progress.json == '{"step": 1}'
    delayed = next(e for e in w.events if e.task_id == b.task_id)
    assert delayed.ready_ms - delayed.at_ms >= 60_000


async def test_a_watcher_from_now_is_caught_up_at_once_then_sees_only_later_events(queues, name):
    await queues.enqueue(name, [NewTask("old")] * 2)
    async with Watcher(queues, name) as w:
        await w.until(lambda ev: ev)
        assert kinds(w.events) == [CAUGHT_UP]
        await queues.enqueue(name, [NewTask("new")])
        await w.until(lambda ev: len(ev) == 2)
    caught_up, new = w.events
    assert new.type == "new" and new.position == caught_up.position + 1


async def test_a_watcher_resumes_after_its_last_position_and_misses_nothing(queues, name):
    async with Watcher(queues, name, from_oldest=True) as w:
        await queues.enqueue(name, [NewTask("t")] * 3)
        await w.until(lambda ev: len(tasks_only(ev)) == 3)
    last = tasks_only(w.events)[-1].position
    await queues.enqueue(name, [NewTask("t")] * 2)  # while nobody watches
    async with Watcher(queues, name, after=last) as again:
        await again.until(lambda ev: CAUGHT_UP in kinds(ev))
        await queues.enqueue(name, [NewTask("t")])
        await again.until(lambda ev: len(tasks_only(ev)) == 3)
    assert kinds(again.events) == ["enqueued", "enqueued", CAUGHT_UP, "enqueued"]
    assert [e.position for e in again.events] == [last + 1, last + 2, last + 2, last + 3]


async def test_dropped_events_show_as_a_gap_never_silently(queues, name):
    await queues.set_policy(name, Policy(keep_events=1))
    await queues.enqueue(name, [NewTask("t")])
    async with Watcher(queues, name, from_oldest=True) as w:
        await w.until(lambda ev: len(ev) == 2)
    first = w.events[0].position
    await queues.enqueue(name, [NewTask("t")] * 400)  # a stream keeps whole nodes: far more than 1
    async with Watcher(queues, name, after=first) as late:
        await late.until(lambda ev: ev and ev[-1].position == first + 400)
    gap, *rest = late.events
    assert gap.kind == GAP and gap.position > first
    assert [e.position for e in tasks_only(rest)] == list(range(gap.position + 1, first + 401))


async def test_no_events_are_kept_when_the_policy_keeps_none(queues, name):
    policy = await queues.set_policy(name, Policy(keep_events=0))
    assert policy.keep_events == 0
    await queues.enqueue(name, [NewTask("t")] * 3)
    assert (await queues.get_policy(name)).keep_events == 0
    await queues.set_policy(name, Policy(keep_events=10))
    await queues.enqueue(name, [NewTask("kept")])
    async with Watcher(queues, name, from_oldest=True) as w:
        await w.until(lambda ev: CAUGHT_UP in kinds(ev))
    assert [e.type for e in w.events] == ["kept", ""], "the four before were never recorded"


def test_watch_queue_over_grpc_replays_what_is_kept(concord_server, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stub = queue_pb2_grpc.QueueServiceStub(ch)
        stub.Enqueue(pb.EnqueueRequest(queue=name, tasks=[pb.NewTask(type="a"), pb.NewTask(type="b")]))
        stream = stub.WatchQueue(pb.WatchQueueRequest(queue=name, from_oldest=True), timeout=10)
        got = [next(stream).event for _ in range(3)]
        stream.cancel()
        assert [(e.kind, e.type) for e in got] == [(pb.QUEUE_EVENT_KIND_ENQUEUED, "a"),
                                                   (pb.QUEUE_EVENT_KIND_ENQUEUED, "b"),
                                                   (pb.QUEUE_EVENT_KIND_CAUGHT_UP, "")]
        resumed = stub.WatchQueue(pb.WatchQueueRequest(queue=name, after=got[0].position), timeout=10)
        assert next(resumed).event.position == got[1].position
        resumed.cancel()
        for bad in (pb.WatchQueueRequest(queue=name, after="x"), pb.WatchQueueRequest(queue="", from_oldest=True),
                    pb.WatchQueueRequest(queue=name, after="1", from_oldest=True)):
            with pytest.raises(grpc.RpcError) as err:
                next(stub.WatchQueue(bad, timeout=10))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_python_client_watches_and_resumes_after_a_position(client, name):
    jobs = client.queue(name)
    first = jobs.put("a")
    with jobs.watch(from_oldest=True) as events:
        seen = []
        for e in events:
            seen.append(e)
            if e.kind == "caught_up":
                break
    assert [(e.kind, e.task_id, e.type) for e in seen] == [("enqueued", first, "a"), ("caught_up", "", "")]
    assert seen[0].at is not None and seen[0].ready_at is not None
    second = jobs.put("b")
    with jobs.watch(after=seen[0].position) as events:
        e = next(iter(events))
    assert (e.kind, e.task_id, e.type) == ("enqueued", second, "b")
