"""What locks and semaphores share in the client: a ``with`` block that acquires
(waiting up to ``timeout``), renews in the background every ttl/3 while the block
runs, releases on exit, and raises the primitive's "lost" error on exit if the hold
was lost meanwhile (the block's work was not protected).

A subclass supplies acquire/refresh/release and three errors; handles (Lease,
Permit) subclass Handle.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from .errors import ConcordError


class Handle:
    """What a successful acquire returns; ``lost`` turns true if renewal finds it gone."""

    def __init__(self, owner: Any, token: str) -> None:
        self.owner = owner
        self.name = owner.name
        self.token = token
        self._lost = False

    @property
    def lost(self) -> bool:
        return self._lost

    def release(self) -> Any:
        return self.owner.release(self)

    def refresh(self, ttl: float | None = None) -> Any:
        return self.owner.refresh(self, ttl)


class Renewal:
    """When to renew next, and when an unrenewable hold must be taken as lost."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.period = ttl / 3
        self.valid_until = time.monotonic() + ttl

    def renewed(self, sent_at: float) -> float:
        self.valid_until = sent_at + self.ttl
        return self.period

    def failed(self) -> float | None:
        """The next delay, or None when the hold may already have expired."""
        left = self.valid_until - time.monotonic()
        return None if left <= 0 else min(self.period, max(0.01, left / 4))

    def within(self, timeout: float) -> float:
        """How long one renewal may keep retrying: not past the moment the hold may
        have expired, so ``lost`` turns true on time during an outage."""
        return max(0.0, min(timeout, self.valid_until - time.monotonic()))


class _Holder:
    client: Any
    ttl: float
    timeout: float | None
    not_held: type[ConcordError]

    def _timeout_error(self) -> ConcordError:
        raise NotImplementedError

    def _lost_error(self, handle: Handle) -> ConcordError:
        raise NotImplementedError


class SyncHolder(_Holder):
    """``with`` support on top of acquire/refresh/release."""

    _held: tuple[Handle, threading.Event, threading.Thread] | None = None

    def __enter__(self) -> Any:
        handle = self.acquire(self.timeout)  # type: ignore[attr-defined]
        if handle is None:
            raise self._timeout_error()
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(handle, stop), name=f"concord-renew {handle.name}",
                                   daemon=True)
        renewer.start()
        self._held = (handle, stop, renewer)
        return handle

    def _renew(self, handle: Handle, stop: threading.Event) -> None:
        plan = Renewal(self.ttl)
        delay: float | None = plan.period
        while not stop.wait(delay):
            sent = time.monotonic()
            try:
                self.refresh(handle, within=plan.within(self.client.timeout))  # type: ignore[attr-defined]
                delay = plan.renewed(sent)
            except self.not_held:
                delay = None
            except ConcordError:
                delay = plan.failed()
            if delay is None:
                handle._lost = True
                return

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._held is not None, "__exit__ without __enter__"
        handle, stop, renewer = self._held
        self._held = None
        stop.set()
        renewer.join()
        if not handle.lost:
            try:
                self.release(handle)  # type: ignore[attr-defined]
            except self.not_held:
                handle._lost = True
        if handle.lost and exc_type is None:
            raise self._lost_error(handle)


class AsyncHolder(_Holder):
    """``async with`` support on top of async acquire/refresh/release."""

    _held: tuple[Handle, asyncio.Task[None]] | None = None

    async def __aenter__(self) -> Any:
        handle = await self.acquire(self.timeout)  # type: ignore[attr-defined]
        if handle is None:
            raise self._timeout_error()
        self._held = (handle, asyncio.create_task(self._renew(handle), name=f"concord-renew {handle.name}"))
        return handle

    async def _renew(self, handle: Handle) -> None:
        plan = Renewal(self.ttl)
        delay: float | None = plan.period
        while delay is not None:
            await asyncio.sleep(delay)
            sent = time.monotonic()
            try:
                await self.refresh(handle, within=plan.within(self.client.timeout))  # type: ignore[attr-defined]
                delay = plan.renewed(sent)
            except self.not_held:
                delay = None
            except ConcordError:
                delay = plan.failed()
        handle._lost = True

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._held is not None, "__aexit__ without __aenter__"
        handle, renewer = self._held
        self._held = None
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
        if not handle.lost:
            try:
                await self.release(handle)  # type: ignore[attr-defined]
            except self.not_held:
                handle._lost = True
        if handle.lost and exc_type is None:
            raise self._lost_error(handle)
