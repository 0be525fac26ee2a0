"""Server streams that pick up where they stopped (queue watches, election observers).

A stream of numbered items is reopened after UNAVAILABLE (a server restarted, Redis
was out) with the position of the last item handed out, so the caller misses
nothing the server still keeps; the server says when something was not kept. A
reconnect backs off from 50 ms to 2 s while it keeps failing. close() ends it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar

import grpc

from .errors import from_rpc_error

T = TypeVar("T")
P = TypeVar("P")


class _Resuming(Generic[T, P]):
    """``open(position)`` starts the stream after ``position``; ``item(message)``
    turns a message into (item, its position)."""

    def __init__(self, open: Callable[[P], Any], item: Callable[[Any], tuple[T, P]], position: P) -> None:
        self._open, self._item = open, item
        self.position = position  # the last item handed out
        self._call: Any = None
        self._closed = False

    def _ends(self, exc: grpc.RpcError) -> bool:
        """Whether a failed stream ends the iteration (else it is reopened); raises
        the typed error of a failure that retrying cannot mend."""
        if self._closed or exc.code() == grpc.StatusCode.CANCELLED:
            return True
        if exc.code() != grpc.StatusCode.UNAVAILABLE:
            raise from_rpc_error(exc) from None
        return False

    def _take(self, message: Any) -> T:
        item, self.position = self._item(message)
        return item

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()


class Resuming(_Resuming[T, P]):
    def __iter__(self) -> Iterator[T]:
        pause = 0.05
        while not self._closed:
            self._call = self._open(self.position)
            try:
                for message in self._call:
                    pause = 0.05
                    yield self._take(message)
                return
            except grpc.RpcError as exc:
                if self._ends(exc):
                    return
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def __enter__(self) -> Resuming[T, P]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncResuming(_Resuming[T, P]):
    async def __aiter__(self) -> AsyncIterator[T]:
        pause = 0.05
        while not self._closed:
            self._call = self._open(self.position)
            try:
                async for message in self._call:
                    pause = 0.05
                    yield self._take(message)
                return
            except asyncio.CancelledError:
                if self._closed:  # close() cancelled the call under us
                    return
                raise
            except grpc.RpcError as exc:
                if self._ends(exc):
                    return
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    async def __aenter__(self) -> AsyncResuming[T, P]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
