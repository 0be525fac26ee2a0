"""Redis Cluster notifications: shard channels on the nodes serving their slots.

``ClusterBus`` is a notifications.Bus over one NotificationBus (one pub/sub
Link) per node: a shard channel is subscribed on the node serving its slot, and
moves when that changes (the slot map is ClusterCommands', store/cluster/commands.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from redis.asyncio.cluster import ClusterNode
from redis.exceptions import RedisClusterException

from ...errors import ConcordError
from ..notifications import NotificationBus
from ..client import unavailable_on_redis_errors
from .commands import ClusterCommands
from .rerun import Rerun

log = logging.getLogger(__name__)


class ClusterBus:
    """Shard channels on the nodes serving their slots (a notifications.Bus).

    A node bus reports what may mean a channel lives elsewhere now: the server
    dropping a subscription (its slot moved), a refused SSUBSCRIBE (MOVED) or a lost
    connection. Each report re-reads the slot map; after every change of the map,
    channels whose owner changed are forgotten on the old node (which no longer
    holds them) and subscribed on the new one, whose confirmation makes their
    owners re-check what they may have missed.
    """

    def __init__(self, commands: ClusterCommands) -> None:
        self._commands = commands
        self._nodes: dict[str, NotificationBus] = {}
        self._subs: dict[str, tuple[Callable[[str], None], Callable[[], None]]] = {}
        self._homes: dict[str, str | None] = {}  # channel -> node it is subscribed on (None: nowhere)
        self._order = asyncio.Lock()  # subscribe, unsubscribe and moves one at a time
        self._mover = Rerun(self._rehome, "concord-cluster-rehome")
        self._retry: asyncio.TimerHandle | None = None
        commands.add_listener(self._mover.request)

    async def subscribe(self, channel: str, on_message: Callable[[str], None], on_subscribed: Callable[[], None]) -> None:
        async with self._order:
            with unavailable_on_redis_errors():
                await self._commands.start()
                node = self._commands.owner(channel)
            self._subs[channel] = (on_message, on_subscribed)
            self._homes[channel] = node.name
            try:
                await self._bus(node).subscribe(channel, on_message, on_subscribed)
            except BaseException:
                self._subs.pop(channel, None)
                self._homes.pop(channel, None)
                raise

    async def unsubscribe(self, channel: str) -> None:
        async with self._order:
            self._subs.pop(channel, None)
            home = self._homes.pop(channel, None)
            if home in self._nodes:
                await self._nodes[home].unsubscribe(channel)

    def _bus(self, node: ClusterNode) -> NotificationBus:
        bus = self._nodes.get(node.name)
        if bus is None:
            name = node.name
            bus = self._nodes[name] = NotificationBus(self._commands.endpoint.at(node.host, node.port),
                                                      on_displaced=lambda c: self._displaced(name, c))
        return bus

    def _displaced(self, node_name: str, cause: str | BaseException) -> None:
        log.debug("notifications on %s displaced: %r", node_name, cause)
        if isinstance(cause, str) and self._homes.get(cause) == node_name:
            # The node dropped this subscription: resubscribe wherever the map says.
            self._nodes[node_name].forget(cause)
            self._homes[cause] = None
        self._commands.refresh()

    async def _rehome(self) -> None:
        """Moves each channel whose slot's owner changed to its new node."""
        homeless = False
        async with self._order:
            for channel, (on_message, on_subscribed) in list(self._subs.items()):
                try:
                    owner = self._commands.owner(channel)
                except RedisClusterException:  # slot not covered right now
                    homeless = True
                    continue
                home = self._homes.get(channel)
                if home == owner.name:
                    continue
                if home in self._nodes:
                    self._nodes[home].forget(channel)  # that node no longer serves the slot
                self._homes[channel] = None
                try:
                    await self._bus(owner).subscribe(channel, on_message, on_subscribed)
                except ConcordError as exc:
                    log.warning("moving notifications of %s to %s failed: %s", channel, owner.name, exc)
                    homeless = True
                else:
                    self._homes[channel] = owner.name
                    log.debug("notifications of %s moved from %s to %s", channel, home, owner.name)
        if homeless and not self._mover.closed:
            # Try again after the next read of the map (this one may predate the move).
            if self._retry is not None:
                self._retry.cancel()
            self._retry = asyncio.get_running_loop().call_later(1.0, self._commands.refresh)

    async def close(self) -> None:
        await self._mover.close()
        if self._retry is not None:
            self._retry.cancel()
        for bus in self._nodes.values():
            await bus.close()
        self._nodes.clear()
