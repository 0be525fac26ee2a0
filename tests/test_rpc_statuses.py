"""@rpc (api/status.py): whatever a servicer method raises ends its call with a
status the client can act on, never none and never UNKNOWN. Stand-in contexts: the
two methods of grpc.aio.ServicerContext that the path uses."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from concord_server.api.status import rpc


class Context:
    def __init__(self, cancelled: bool = False) -> None:
        self.aborted = None
        self._cancelled = cancelled

    def cancelled(self) -> bool:
        return self._cancelled

    async def abort_with_status(self, status) -> None:
        self.aborted = status
        raise grpc.aio.AbortError()


async def test_an_error_after_the_client_cancelled_is_not_logged_as_an_error(caplog):
    """A stream whose client cancelled fails at its next write or read; that echo of
    the cancel must not be logged at ERROR with a traceback (1,000 cancelled chat
    subscribers gave 973 of them)."""
    class Servicer:
        @rpc
        async def Subscribe(self, request, context):
            yield 1
            raise RuntimeError("write after the client cancelled")

    context = Context(cancelled=True)
    with caplog.at_level(logging.DEBUG, logger="concord_server"):
        with pytest.raises(grpc.aio.AbortError):
            async for _ in Servicer().Subscribe(object(), context):
                pass
    assert context.aborted is not None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_a_call_ended_by_a_cancellation_nobody_asked_of_it_is_answered_unavailable():
    """A handler that raises CancelledError while neither its client nor the server
    cancelled it (a future it shared was cancelled by another caller) would end with
    no status, and its client would wait to its deadline: it is answered UNAVAILABLE."""
    shared = asyncio.get_running_loop().create_future()

    class Servicer:
        @rpc
        async def Enqueue(self, request, context):
            return await shared

    context = Context()
    call = asyncio.ensure_future(Servicer().Enqueue(object(), context))
    await asyncio.sleep(0)
    shared.cancel()  # by someone else: this call's task was never cancelled
    with pytest.raises(grpc.aio.AbortError):
        await call
    assert context.aborted is not None and context.aborted.code == grpc.StatusCode.UNAVAILABLE
    # A call its client cancelled still ends cancelled, with nothing sent.
    context, shared = Context(), asyncio.get_running_loop().create_future()
    call = asyncio.ensure_future(Servicer().Enqueue(object(), context))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert context.aborted is None


async def test_a_redis_failure_that_escaped_its_mapping_is_unavailable_and_logged_as_a_bug(caplog):
    """A Redis call made outside store/client.py's mapping once let a lost connection
    through as INTERNAL (a waiter's replica confirmation during a Sentinel failover):
    the client must hear UNAVAILABLE (retryable), and the log still says BUG."""

    class Servicer:
        @rpc
        async def Campaign(self, request, context):
            raise RedisConnectionError("Connection to Redis at 127.0.0.1:1 lost")

    context = Context()
    with caplog.at_level(logging.ERROR, logger="concord_server"):
        with pytest.raises(grpc.aio.AbortError):
            await Servicer().Campaign(object(), context)
    assert context.aborted.code == grpc.StatusCode.UNAVAILABLE
    assert any("BUG" in r.getMessage() for r in caplog.records), caplog.text
