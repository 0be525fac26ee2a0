"""Queue.put from many threads (or tasks) at once shares Enqueue calls
(concord._coalesce): every put still gets its own id or its own error."""

from __future__ import annotations

import asyncio
import threading

import pytest

import concord
from concord._coalesce import AsyncCoalescer, Coalescer
from support import wait_until


def held_first_send(coalescer, until_waiting: int) -> list[int]:
    """Wraps the coalescer's send: the first batch waits until ``until_waiting`` puts
    queue up behind it, so the next batch is known to hold them. Returns the sizes
    of the batches sent."""
    sizes: list[int] = []
    send = coalescer._send

    def counted(items):
        sizes.append(len(items))
        if len(sizes) == 1:
            wait_until(lambda: len(coalescer._waiting) >= until_waiting, message="puts queued behind the first")
        return send(items)

    coalescer._send = counted
    return sizes


def test_puts_from_many_threads_share_enqueue_calls_and_each_gets_its_own_task(client, name):
    q = client.queue(name)
    q.put("warm", 0)  # creates the queue's coalescer
    sizes = held_first_send(client._enqueuers[name], until_waiting=8)
    handles: dict[int, str] = {}

    def put(i: int) -> None:
        handles[i] = q.put("t", i)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sizes[0] == 1 and sizes[1] == 8 and len(sizes) == 2
    assert len(set(handles.values())) == 9
    for i, task_id in handles.items():
        assert q.get_task(task_id).json() == i  # each id names the put's own task
    assert q.stats().ready == 10


def test_one_bad_put_in_a_shared_batch_fails_alone(client, name):
    q = client.queue(name)
    q.put("warm", 0)
    coalescer = client._enqueuers[name]
    sizes = held_first_send(coalescer, until_waiting=3)
    outcomes: dict[str, object] = {}

    def put(key: str, **options) -> None:
        try:
            outcomes[key] = q.put("t", key, **options)
        except concord.ConcordError as exc:
            outcomes[key] = exc

    first = threading.Thread(target=put, args=("first",))
    first.start()
    wait_until(lambda: sizes, message="first batch sent")
    rest = [threading.Thread(target=put, args=("a",)), threading.Thread(target=put, args=("bad",),
                                                                        kwargs={"priority": 5000}),
            threading.Thread(target=put, args=("b",))]
    for t in rest:
        t.start()
    for t in [first, *rest]:
        t.join(30)
    assert sizes[:2] == [1, 3]  # the three went together, then again one by one
    assert isinstance(outcomes["bad"], concord.InvalidArgument)
    for key in ("first", "a", "b"):
        assert q.get_task(outcomes[key]).payload == key.encode()
    assert q.stats().ready == 4  # warm, first, a, b: the bad one added nothing


async def test_async_puts_share_enqueue_calls(aclient, name):
    q = aclient.queue(name)
    await q.put("warm", 0)
    coalescer = aclient._enqueuers[name]
    sizes: list[int] = []
    send = coalescer._send

    async def counted(items):
        sizes.append(len(items))
        return await send(items)

    coalescer._send = counted
    handles = await asyncio.gather(*(q.put("t", i) for i in range(50)))
    assert len(set(handles)) == 50 and sum(sizes) == 50
    assert sizes[0] == 1 and len(sizes) <= 3  # one alone, then the rest behind it (at most MAX_BATCH each)
    for i in (0, 17, 49):
        assert (await q.get_task(handles[i])).json() == i


def test_an_error_of_the_whole_batch_reaches_every_put_in_it():
    release = threading.Event()
    calls: list[list[int]] = []

    def send(items: list[int]) -> list[int]:
        calls.append(items)
        if len(calls) == 1:
            release.wait(10)
            return [i * 10 for i in items]
        raise concord.Unavailable("the server went away")

    c: Coalescer[int, int] = Coalescer(send)
    results: dict[int, object] = {}

    def submit(i: int) -> None:
        try:
            results[i] = c.submit(i)
        except concord.ConcordError as exc:
            results[i] = exc

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(4)]
    threads[0].start()
    wait_until(lambda: calls, message="first batch in flight")
    for t in threads[1:]:
        t.start()
    wait_until(lambda: len(c._waiting) == 3, message="three waiting")
    release.set()
    for t in threads:
        t.join(10)
    assert results[0] == 0 and calls[1] == [1, 2, 3]
    assert all(isinstance(results[i], concord.Unavailable) for i in (1, 2, 3))
    assert not c._busy and not c._waiting  # the next put goes at once again


async def test_a_cancelled_waiter_leaves_the_batch_and_the_others_still_go():
    gate = asyncio.Event()
    calls: list[list[int]] = []

    async def send(items: list[int]) -> list[int]:
        calls.append(items)
        if len(calls) == 1:
            await gate.wait()
        return [i * 10 for i in items]

    c: AsyncCoalescer[int, int] = AsyncCoalescer(send)
    first = asyncio.create_task(c.submit(1))
    await asyncio.sleep(0)
    doomed = asyncio.create_task(c.submit(2))
    kept = asyncio.create_task(c.submit(3))
    await asyncio.sleep(0)
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    gate.set()
    assert await first == 10 and await kept == 30
    assert calls == [[1], [3]]
