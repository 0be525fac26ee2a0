"""Redis Sentinel: which node is the primary, asked afresh for every new connection.

Sentinel is used for discovery only; the connections stay Concord's own Links
(link.py). redis-py's asyncio Sentinel client retries on the connection it has,
and has kept talking to, and writing to, a primary after Sentinel demoted it
(redis/redis-py #3874, #3560). Here there is nothing to keep: ``Link.open`` on an
endpoint with ``sentinels`` asks them for the primary (``SENTINEL
GET-MASTER-ADDR-BY-NAME``, each Sentinel in turn until one knows), connects there
and checks ``ROLE`` says ``master`` before anyone may use the link. So a failover
is followed by every path that already makes a new connection:

- a lost connection (the old primary died or was cut off): the next command or the
  pub/sub keeper opens a new Link, which asks the Sentinels again;
- a ``READONLY`` reply (the old primary is alive but was demoted): link.py closes
  that link after handing the error to its caller (UNAVAILABLE, retryable);
- Sentinel's ``+switch-master`` (``SwitchWatch``): the server drops its links to
  the old primary at once, before any command finds out the hard way, so reads
  are never answered by a node that is no longer the primary for long.

A replica that Sentinel has not promoted is never written to: ``ROLE`` is checked
on every connection, and a replica answers writes ``READONLY`` anyway.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis import exceptions as rexc

if TYPE_CHECKING:
    from .link import Endpoint

log = logging.getLogger(__name__)

SWITCH = "+switch-master"
_BACKOFF = (0.1, 2.0)  # seconds between SwitchWatch's reconnects: first, most


@dataclasses.dataclass(frozen=True)
class Sentinels:
    """Where the Sentinels are and how to talk to them (their own user and password;
    TLS as for the data nodes)."""

    nodes: tuple[tuple[str, int], ...]
    service: str
    username: str | None = None
    password: str | None = None

    def endpoints(self, base: Endpoint) -> list[Endpoint]:
        """One endpoint per Sentinel, starting at a random one: the servers of a
        deployment do not all ask the same Sentinel first."""
        start = random.randrange(len(self.nodes))
        order = self.nodes[start:] + self.nodes[:start]
        return [dataclasses.replace(base, host=h, port=p, path=None, db=0, username=self.username,
                                    password=self.password, sentinels=None) for h, p in order]


async def primary_of(endpoint: Endpoint) -> Endpoint:
    """The endpoint of the current primary, as the first Sentinel that knows says;
    ConnectionError when none does (no Sentinel reachable, or no primary elected)."""
    from .link import Link

    assert endpoint.sentinels is not None
    problems = []
    for at in endpoint.sentinels.endpoints(endpoint):
        try:
            link = await Link.open(at)
        except rexc.RedisError as exc:
            problems.append(f"{at.name}: {exc}")
            continue
        try:
            reply = await asyncio.wait_for(link.send(("SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                                      endpoint.sentinels.service)), endpoint.connect_timeout)
        except (rexc.RedisError, TimeoutError) as exc:
            problems.append(f"{at.name}: {exc}")
            continue
        finally:
            link.close()
        if reply:
            host, port = reply[0], int(reply[1])
            return dataclasses.replace(endpoint, host=host, port=port, path=None, sentinels=None)
        problems.append(f"{at.name}: no primary for {endpoint.sentinels.service!r}")
    raise rexc.ConnectionError(f"no Sentinel named a primary for {endpoint.sentinels.service!r}: "
                               + "; ".join(problems))


def is_primary(role_reply: Any) -> bool:
    """ROLE's first element: "master" on a primary, "slave" on a replica."""
    return bool(role_reply) and role_reply[0] == "master"


class SwitchWatch:
    """Listens for ``+switch-master`` on one Sentinel at a time (the next one when it
    goes away) and calls ``on_switch(new_host, new_port)`` when the service's
    primary changes."""

    def __init__(self, endpoint: Endpoint, on_switch: Callable[[str, int], None]) -> None:
        assert endpoint.sentinels is not None
        self._endpoint = endpoint
        self._on_switch = on_switch
        self._task: asyncio.Task[None] | None = None

    def start(self) -> SwitchWatch:
        self._task = asyncio.create_task(self._watch(), name="concord-sentinel-watch")
        return self

    async def _watch(self) -> None:
        from .link import Link

        assert self._endpoint.sentinels is not None
        backoff = _BACKOFF[0]
        while True:
            for at in self._endpoint.sentinels.endpoints(self._endpoint):
                try:
                    link = await Link.open(at, on_push=self._heard)
                except rexc.RedisError:
                    continue
                gone = asyncio.Event()
                link.on_lost(lambda exc: gone.set())
                link.send(("SUBSCRIBE", SWITCH))
                backoff = _BACKOFF[0]
                try:
                    await gone.wait()
                finally:
                    link.close()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF[1])

    def _heard(self, msg: Any) -> None:
        # ["message", "+switch-master", "<service> <old-ip> <old-port> <new-ip> <new-port>"]
        if not isinstance(msg, list) or len(msg) < 3 or msg[0] != "message" or msg[1] != SWITCH:
            return
        parts = str(msg[2]).split()
        assert self._endpoint.sentinels is not None
        if len(parts) == 5 and parts[0] == self._endpoint.sentinels.service:
            log.warning("Sentinel: the primary of %r moved from %s:%s to %s:%s", parts[0], parts[1], parts[2],
                        parts[3], parts[4])
            self._on_switch(parts[3], int(parts[4]))

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
