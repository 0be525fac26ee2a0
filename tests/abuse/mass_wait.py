"""Item 6, mass waiting: thousands of blocked lock Acquires (10,000 in the full form)
on locks the attacker holds, then a deadlock-detection graph of owners x locks
(400 x 64 in the full form: each lock held by one owner, every owner waiting for the
next lock, so the holders form one long cycle). Promise: "a blocked call answers
within its wait + 0.5 s", for every one of them (a refusal such as RESOURCE_EXHAUSTED
or ABORTED / DEADLOCK is an answer too), with the victim's p99 held.

The calls start at LAUNCH_RATE per second and their timeouts are spread over [W, 2W],
so neither their sending nor their answers swamp this one client process (its own lag
would be blamed on the server); the client's event-loop lag is reported beside the
verdict (client_loop_lag_max_ms) so a late answer can be told from a late client.
Calls are spread over channels of their own (a per-connection stream cap is the
server's right)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import grpc
from google.protobuf import duration_pb2

from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc

from .harness import ATTACKER, bearer

SLACK = 0.5
PER_CHANNEL = 100
LAUNCH_RATE = 1000  # calls started per second


async def _launch(calls) -> None:
    """Starts the coroutines at LAUNCH_RATE per second and waits for them all."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks = []
    for i, call in enumerate(calls):
        due = start + i / LAUNCH_RATE
        if due > loop.time():
            await asyncio.sleep(due - loop.time())
        tasks.append(asyncio.create_task(call))
    await asyncio.gather(*tasks)


async def _lag(worst: list[float]) -> None:
    """The client's own event-loop lag: how late a 10 ms sleep wakes, at worst."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(0.01)
        worst[0] = max(worst[0], loop.time() - before - 0.01)


def _seconds(s: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromMilliseconds(int(s * 1000))
    return d


class _Channels:
    def __init__(self, target: str, calls: int) -> None:
        self.channels = [grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1),
                                                                    ("abuse.channel", i)])
                         for i in range(max(1, -(-calls // PER_CHANNEL)))]
        self.stubs = [lock_pb2_grpc.LockServiceStub(c) for c in self.channels]

    def stub(self, i: int) -> lock_pb2_grpc.LockServiceStub:
        return self.stubs[(i // PER_CHANNEL) % len(self.stubs)]

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.channels))


async def _wait(ctx, stub, request: pb.AcquireRequest, wait: float, late: list, answers: Counter) -> None:
    start = time.monotonic()
    try:
        reply = await stub.Acquire(request, metadata=bearer(ATTACKER), timeout=wait + 60)
        code = "OK" if not reply.acquired else "OK-acquired"
        ctx.record("OK")
    except grpc.RpcError as exc:
        code = exc.code().name
        ctx.record(exc.code())
    answers[code] += 1
    took = time.monotonic() - start
    if took > wait + SLACK:
        late.append((round(took, 2), round(wait, 2), code))


async def _attack(ctx) -> None:
    waiters = ctx.scale.n(1_000, 10_000)
    owners, locks = ctx.scale.n(40, 400), ctx.scale.n(16, 64)
    wait_a, wait_b = ctx.scale.n(1, 10), ctx.scale.n(1.5, 30)
    channels = _Channels(ctx.server.target, max(waiters, owners))
    try:
        hold = channels.stub(0)
        ttl = _seconds(600)
        await hold.Acquire(pb.AcquireRequest(name="warm", ttl=ttl), metadata=bearer(ATTACKER), timeout=30)
        ctx.baseline()
        worst_lag = [0.0]
        lag_task = asyncio.create_task(_lag(worst_lag))
        late: list = []
        answers: Counter = Counter()
        with ctx.attacking():
            for i in range(10):
                await hold.Acquire(pb.AcquireRequest(name=f"held-{i}", ttl=ttl), metadata=bearer(ATTACKER), timeout=30)
            calls = []
            for i in range(waiters):
                wait = wait_a * (1 + (i % 100) / 100)
                calls.append(_wait(ctx, channels.stub(i), pb.AcquireRequest(
                    name=f"held-{i % 10}", ttl=ttl, wait_timeout=_seconds(wait)), wait, late, answers))
            await _launch(calls)
            mass = dict(answers)
            answers.clear()
            for i in range(locks):  # owner o<i> holds lock g<i>
                await hold.Acquire(pb.AcquireRequest(name=f"g{i}", ttl=ttl, owner=f"o{i}"),
                                   metadata=bearer(ATTACKER), timeout=30)
            calls = []
            for j in range(owners):  # every owner waits for the next lock: o0 -> g1 (held by o1) -> g2 ...
                wait = wait_b * (1 + (j % 100) / 100)
                calls.append(_wait(ctx, channels.stub(j), pb.AcquireRequest(
                    name=f"g{(j + 1) % locks}", ttl=ttl, wait_timeout=_seconds(wait), owner=f"o{j}"),
                    wait, late, answers))
            await _launch(calls)
        lag_task.cancel()
        ctx.figures.update(client_loop_lag_max_ms=round(1000 * worst_lag[0], 1), waiters=waiters, wait_s=wait_a, mass_answers=mass, graph=f"{owners}x{locks}",
                           graph_wait_s=wait_b, graph_answers=dict(answers), late=len(late),
                           latest=sorted(late, reverse=True)[:5])
        assert not late, f"{len(late)} waits answered later than wait + {SLACK} s, e.g. {sorted(late, reverse=True)[:5]}"
    finally:
        await channels.close()


def run(ctx) -> None:
    asyncio.run(_attack(ctx))
