"""The Redis connection layer: a reply reaches only the call that sent its command.

Against real Redis servers: replies stay with their commands while Redis is killed
and restarted under concurrent traffic with cancelled callers; a paused Redis fails
what is in flight within the reply timeout instead of hanging; a replaced
connection owes nothing; a script reply of the wrong shape is refused, logged with
the script's name, and the connection dropped; every declared script has a shape.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import random
import signal
import time

import pytest
from redis.client import NEVER_DECODE
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from concord_server.store import scripts
from concord_server.errors import ReplicationTimeout, Unavailable
from concord_server.store.autopipeline import AutoPipeline
from concord_server.store.replica_acks import ReplicaAcks
from concord_server.store.notifications import NotificationBus
from concord_server.primitives import autocomplete, chat, files, lock, queue, semaphore  # noqa: F401 (declares scripts)
from concord_server.store.link import Endpoint, Link
from concord_server.store.reply_shapes import INT, STR, Codes, Either, Maybe, Seq, Tagged, Tup

from support import async_wait_until

UNAVAILABLE = (RedisConnectionError, RedisTimeoutError)


async def test_replies_stay_with_their_commands_across_redis_restarts(fresh_redis):
    """Fifty concurrent callers, each checking that every reply is its own, some
    cancelling mid-flight, while Redis is SIGKILLed and restarted four times."""
    rnd = random.Random(7)
    pipe = AutoPipeline(Endpoint.from_url(fresh_redis.url))
    outcomes: collections.Counter[str] = collections.Counter()
    wrong: list[tuple] = []
    stop = asyncio.Event()

    async def caller(i: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            token = f"{i}-{n}"
            kind = rnd.choice(("echo", "eval", "smembers", "cancel"))
            try:
                if kind == "cancel":
                    with pytest.raises(TimeoutError):
                        await asyncio.wait_for(pipe.execute_command("ECHO", token), 0)
                    continue
                if kind == "echo":
                    ok, reply = None, await pipe.execute_command("ECHO", token, **{NEVER_DECODE: True})
                    ok = reply == token.encode()
                elif kind == "eval":
                    reply = await pipe.execute_command("EVAL", "return {ARGV[1], 7}", 0, token)
                    ok = reply == [token, 7]
                else:
                    reply = await pipe.execute_command("SMEMBERS", f"none:{token}")
                    ok = reply == []
                outcomes["ok" if ok else "wrong"] += 1
                if not ok:
                    wrong.append((kind, token, reply))
            except UNAVAILABLE:
                outcomes["unavailable"] += 1
            except ResponseError as exc:  # LOADING while the AOF is read back
                outcomes["loading" if "LOADING" in str(exc) else "wrong"] += 1
                if "LOADING" not in str(exc):
                    wrong.append((kind, token, exc))

    callers = [asyncio.create_task(caller(i)) for i in range(50)]
    try:
        for _ in range(4):
            before = outcomes["ok"]
            await async_wait_until(lambda: _true(outcomes["ok"] > before + 500), message="traffic before the kill")
            await asyncio.to_thread(fresh_redis.kill)
            await asyncio.to_thread(fresh_redis.start)
        before = outcomes["ok"]
        await async_wait_until(lambda: _true(outcomes["ok"] > before + 500), message="traffic after the last restart")
    finally:
        stop.set()
        await asyncio.gather(*callers)
        await pipe.aclose()
    assert not wrong, wrong[:5]
    assert outcomes["unavailable"] > 0  # the kills did land on commands in flight


async def _true(value: bool) -> bool:
    return value


async def test_a_caller_cancelled_while_its_batch_is_confirmed_leaves_the_others_their_answer(redis_server, name):
    """With replica acks the changes of one batch share one WAIT's confirmation: a
    caller cancelled while it waits must not cancel it for the rest (their calls
    would end cancelled, and gRPC sends such a call no status: its client waited to
    its deadline; the Sentinel campaign saw it). No replica here: the WAIT comes
    back short, so each caller hears ReplicationTimeout."""
    acks = ReplicaAcks(replicas=1, timeout_ms=300)
    pipe = AutoPipeline(Endpoint.from_url(redis_server.url, replica_acks=acks))
    try:
        calls = [asyncio.ensure_future(pipe.execute_command("SET", f"{name}-{i}", "v")) for i in range(3)]
        await asyncio.sleep(0.1)  # all three sent and replied to; their WAIT is out
        calls[0].cancel()
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError)
        assert all(isinstance(r, ReplicationTimeout) for r in results[1:]), results
    finally:
        await pipe.aclose()


async def test_a_paused_redis_fails_what_is_in_flight_within_the_reply_timeout(fresh_redis):
    pipe = AutoPipeline(Endpoint.from_url(fresh_redis.url, reply_timeout=0.5))
    assert await pipe.execute_command("PING") == "PONG"
    os.kill(fresh_redis.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(RedisTimeoutError):
            await pipe.execute_command("ECHO", "x")
        assert time.monotonic() - started < 3.0
    finally:
        os.kill(fresh_redis.proc.pid, signal.SIGCONT)
    # The connection that timed out is gone; the next command gets a fresh one.
    assert await pipe.execute_command("ECHO", "after") == "after"
    await pipe.aclose()


async def test_a_closed_link_fails_what_it_owes_and_never_sends_again(redis_server):
    link = await Link.open(Endpoint.from_url(redis_server.url))
    owed = link.send(("BLPOP", "never-pushed", 0))  # would be answered never
    link.close(RedisConnectionError("test"))
    with pytest.raises(RedisConnectionError):
        await owed
    with pytest.raises(RedisConnectionError):
        await link.send(("PING",))


async def test_error_replies_become_redis_py_exceptions(redis_server):
    pipe = AutoPipeline(Endpoint.from_url(redis_server.url))
    with pytest.raises(NoScriptError):
        await pipe.execute_command("EVALSHA", "0" * 40, 0)
    with pytest.raises(ResponseError):
        await pipe.execute_command("NOSUCHCOMMAND")
    assert await pipe.execute_command("ECHO", "still in step") == "still in step"
    await pipe.aclose()


async def test_a_bad_password_is_unavailable_not_a_crash(redis_server):
    with pytest.raises(RedisConnectionError):  # AuthenticationError is one
        await Link.open(Endpoint.from_url(redis_server.url.replace("redis://", "redis://nobody:wrong@")))


async def test_a_reply_out_of_shape_is_refused_logged_and_drops_the_connection(redis_server, caplog):
    pipe = AutoPipeline(Endpoint.from_url(redis_server.url))
    bogus = scripts.Script("lock_release.lua", Tagged({0: Tup(), 1: Tup(STR)}))  # a lock script, its own shape...
    assert await bogus(pipe, ["{x}:a", "{x}:b", "{x}:c", "{x}:d", "{x}:e"], ["ch", 1000, "no-such-lease"]) == [0]
    first = pipe._link
    liar = scripts.Script("lock_release.lua", Tup(INT, STR))  # ...now promised a pair
    with caplog.at_level(logging.ERROR, logger="concord_server.store.scripts"):
        with pytest.raises(Unavailable):
            await liar(pipe, ["{x}:a", "{x}:b", "{x}:c", "{x}:d", "{x}:e"], ["ch", 1000, "no-such-lease"])
    assert "lock_release.lua" in caplog.text and "BUG" in caplog.text
    assert not first.alive
    assert await pipe.execute_command("PING") == "PONG"  # a fresh connection
    await pipe.aclose()


def test_every_script_declares_a_reply_shape_and_every_entry_script_is_declared():
    import concord_server.app  # noqa: F401 - imports every primitive, so every script is declared
    import concord_server.console.sampler  # noqa: F401 - the console's (imported only with it on)
    import concord_server.console.sessions  # noqa: F401

    declared = scripts.registered()
    from importlib import resources

    lua = resources.files("concord_server").joinpath("lua")
    entries = {p.name for p in lua.iterdir() if p.name.endswith(".lua") and not _included(p.name)}
    assert set(declared) == entries
    assert all(s.reply is not None for s in declared.values())


def _included(name: str) -> bool:
    """Helper files live in lua/include/ (so they are not entry scripts)."""
    from importlib import resources

    return resources.files("concord_server").joinpath("lua", "include", name).is_file()


@pytest.mark.parametrize("shape, good, bad", [
    (Codes(0, 1), [0, 1], [2, "1", None, [1]]),
    (Maybe(STR), ["x", b"x", None], [1, ["x"]]),
    (Tup(INT, STR), [[1, "a"]], [[1], [1, "a", 2], ["a", 1], 1]),
    (Seq(INT, each=(STR, INT)), [[1], [1, "a", 2], [1, "a", 2, "b", 3]], [[1, "a"], ["x"], [1, "a", "b"]]),
    (Tagged({0: Tup(), 1: Tup(INT, INT)}), [[0], [1, 2, 3]], [[0, 1], [1, 2], [2], [], "0"]),
    (Either(Codes(-1, 0), Tup(INT, INT)), [-1, 0, [3, 4]], [1, [3]]),
])
def test_shapes_accept_what_they_say_and_nothing_else(shape, good, bad):
    assert all(shape.fits(v) for v in good), [v for v in good if not shape.fits(v)]
    assert not any(shape.fits(v) for v in bad), [v for v in bad if shape.fits(v)]


async def test_a_channel_subscribed_while_redis_is_down_is_subscribed_when_it_is_back(fresh_redis):
    bus = NotificationBus(Endpoint.from_url(fresh_redis.url))
    await asyncio.to_thread(fresh_redis.kill)
    confirmed, messages = asyncio.Event(), []
    try:
        await bus.subscribe("{c}:bell", messages.append, confirmed.set)  # lists it; does not raise
        await asyncio.to_thread(fresh_redis.start)
        await asyncio.wait_for(confirmed.wait(), 10)
        pipe = AutoPipeline(Endpoint.from_url(fresh_redis.url))
        await pipe.execute_command("SPUBLISH", "{c}:bell", "ring")
        await async_wait_until(lambda: _true(messages == ["ring"]), message="the message")
        await pipe.aclose()
    finally:
        await bus.close()


@pytest.mark.parametrize("wait_ms", [0, 600])
async def test_a_blocked_call_answers_within_its_wait_while_redis_is_paused(fresh_redis, name, wait_ms):
    """The DESIGN rule: a blocked call ends by its own wait timeout (+ LATE), even when
    Redis answers nothing at all; it says UNAVAILABLE, since it cannot know what
    Redis did with its script, and lets go of whatever that took in the background."""
    from support import lock_primitive, queue_primitive

    async with lock_primitive(fresh_redis.url) as locks, queue_primitive(fresh_redis.url) as queues:
        await locks.acquire(name, 30_000, 0, "holder")
        os.kill(fresh_redis.proc.pid, signal.SIGSTOP)
        try:
            for call in (lambda: locks.acquire(name, 30_000, wait_ms, "waiter"),
                         lambda: queues.dequeue([name], 1, 30_000, wait_ms)):
                started = time.monotonic()
                with pytest.raises(Unavailable):
                    await call()
                assert time.monotonic() - started < wait_ms / 1000 + 0.5
        finally:
            os.kill(fresh_redis.proc.pid, signal.SIGCONT)


async def test_a_new_pubsub_connection_subscribes_channels_of_several_slots_on_a_cluster_node(redis_cluster):
    """On (re)connect the bus subscribes every listed channel; a cluster node refuses
    one SSUBSCRIBE naming channels of two slots (CROSSSLOT), so each goes alone."""
    node = redis_cluster.owner("{a}")
    other = next(f"{{b{i}}}" for i in range(1000) if redis_cluster.owner(f"{{b{i}}}") is node)
    bus = NotificationBus(Endpoint.from_url(node.url))
    confirmed = {"{a}:wake": asyncio.Event(), f"{other}:wake": asyncio.Event()}
    try:
        for channel, event in confirmed.items():  # both listed before the connection exists
            await bus.subscribe(channel, lambda data: None, event.set)
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in confirmed.values())), 10)
    finally:
        await bus.close()
