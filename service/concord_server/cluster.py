"""Redis Cluster: every command goes to the primary serving its key's slot.

redis-py's RedisCluster keeps the slot map (discovery from any node, auth, TLS,
MOVED bookkeeping); this module adds the routing the hot path needs on top of it.

- ``ClusterCommands`` is AutoPipeline's interface over one AutoPipeline per primary:
  EVALSHA goes by its first key (all keys of a script share a hash tag, so one
  slot), a plain command by its key, SCRIPT LOAD to every primary. MOVED updates
  the map and the command is retried once on the new owner; ASK is answered on
  the importing node after ASKING; a connection error re-reads the whole map in
  the background. The standalone path never comes here.
- ``ClusterBus`` is NotificationBus's interface over one NotificationBus (one
  pub/sub connection) per node: a shard channel is subscribed on the node serving
  its slot, and moves when that changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.client import NEVER_DECODE
from redis.exceptions import AskError, MovedError, RedisClusterException, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .autopipeline import AutoPipeline
from .errors import ConcordError
from .notifications import NotificationBus
from .redis_client import unavailable_on_redis_errors

log = logging.getLogger(__name__)

_SCRIPT_CALLS = frozenset({"EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO", "FCALL", "FCALL_RO"})
_EVERY_PRIMARY = frozenset({"SCRIPT"})
_REFRESH_GAP = 0.1  # seconds between slot map reads while errors keep asking for one


class _Endpoint(NamedTuple):
    """What AutoPipeline reads from a pool: how to open a connection to one node."""

    connection_class: type
    connection_kwargs: dict[str, Any]


def _command_key(args: tuple[Any, ...]) -> Any:
    """The key that picks the slot: a script's first key, else the first argument."""
    if args[0].upper() in _SCRIPT_CALLS:
        return args[3] if int(args[2]) > 0 else None
    return args[1] if len(args) > 1 else None


class ClusterCommands:
    def __init__(self, cluster: aioredis.RedisCluster) -> None:
        self.cluster = cluster
        self._pipes: dict[str, AutoPipeline] = {}  # node name -> its pipeline
        self._started = False
        self._starting = asyncio.Lock()
        self._refreshing: asyncio.Task[None] | None = None
        self._again = False
        self._closed = False
        self._listeners: list[Callable[[], None]] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if not self._started:
            await self.start()
        if args[0] in _EVERY_PRIMARY:
            return await self._on_every_primary(*args, **options)
        node = self.owner(_command_key(args))
        try:
            return await self._pipe(node).execute_command(*args, **options)
        except MovedError as exc:
            # Resharding or failover gave the slot a new owner: note it, try there once.
            log.debug("slot %d moved to %s:%s; retrying there", exc.slot_id, exc.host, exc.port)
            await self.cluster.nodes_manager.move_slot(exc)
            self._notify()
            try:
                return await self._pipe(self.owner_of_slot(exc.slot_id)).execute_command(*args, **options)
            except (AskError, RedisConnectionError, RedisTimeoutError):
                self.refresh()  # the map is further off than one slot
                raise
        except AskError as exc:
            log.debug("slot %d migrating: asking %s:%s", exc.slot_id, exc.host, exc.port)
            return await self._asking(exc, args, options)
        except (RedisConnectionError, RedisTimeoutError):
            self.refresh()  # the node may be gone and its slots served elsewhere now
            raise

    async def start(self) -> None:
        """Reads the slot map from the URL's node; Redis errors propagate (retried on next use)."""
        if self._started:
            return
        async with self._starting:
            if self._started:
                return
            try:
                await self.cluster.initialize()
            except RedisClusterException as exc:  # e.g. no node reachable
                raise RedisConnectionError(f"Redis Cluster not usable: {exc}") from exc
            self._started = True

    def owner(self, key: Any) -> ClusterNode:
        """The primary serving key's slot in the current map (any primary for no key)."""
        if key is None:
            return self.cluster.get_primaries()[0]
        return self.owner_of_slot(self.cluster.keyslot(key))

    def owner_of_slot(self, slot: int) -> ClusterNode:
        return self.cluster.nodes_manager.get_node_from_slot(slot)

    async def on_each_primary(self, index: int, *args: Any, **options: Any) -> tuple[Any, int]:
        """One command on the index-th primary in name order (a SCAN step over the
        whole cluster visits each in turn); returns (its reply, how many primaries)."""
        if not self._started:
            await self.start()
        primaries = sorted(self.cluster.get_primaries(), key=lambda n: n.name)
        if index >= len(primaries):
            return None, len(primaries)
        try:
            return await self._pipe(primaries[index]).execute_command(*args, **options), len(primaries)
        except (RedisConnectionError, RedisTimeoutError):
            self.refresh()
            raise

    def add_listener(self, on_change: Callable[[], None]) -> None:
        """on_change() runs (synchronously) whenever the slot map may have changed."""
        self._listeners.append(on_change)

    def refresh(self) -> None:
        """Re-reads the slot map in the background; requests during a read coalesce into one more."""
        if self._closed:
            return
        if self._refreshing is not None and not self._refreshing.done():
            self._again = True
            return
        self._refreshing = asyncio.create_task(self._reread(), name="concord-cluster-refresh")

    async def _reread(self) -> None:
        while True:
            self._again = False
            try:
                if self._started:
                    await self.cluster.nodes_manager.initialize()
                else:
                    await self.start()
            except (RedisError, RedisClusterException) as exc:
                log.warning("reading the Redis Cluster slot map failed: %s", exc)
            else:
                log.debug("Redis Cluster slot map read: primaries %s",
                          ", ".join(n.name for n in self.cluster.get_primaries()))
                self._notify()
            if not self._again:
                return
            await asyncio.sleep(_REFRESH_GAP)

    def _notify(self) -> None:
        for on_change in self._listeners:
            on_change()

    def _pipe(self, node: ClusterNode) -> AutoPipeline:
        pipe = self._pipes.get(node.name)
        if pipe is None:
            # Fail fast on a dead node (no connect retries): the caller's error
            # triggers a map refresh, and the next command may go elsewhere.
            kwargs = {**node.connection_kwargs, "retry": Retry(NoBackoff(), 0)}
            pipe = self._pipes[node.name] = AutoPipeline(_Endpoint(node.connection_class, kwargs))  # type: ignore[arg-type]
        return pipe

    async def _on_every_primary(self, *args: Any, **options: Any) -> Any:
        """SCRIPT LOAD: a primary that is down now gets the script when it next says NOSCRIPT,
        so one down node must not fail the load for the others."""
        replies = await asyncio.gather(*(self._pipe(n).execute_command(*args, **options)
                                         for n in self.cluster.get_primaries()), return_exceptions=True)
        ok = [r for r in replies if not isinstance(r, BaseException)]
        if not ok:
            raise replies[0]
        for node, reply in zip(self.cluster.get_primaries(), replies):
            if isinstance(reply, BaseException):
                log.warning("%s on %s failed: %s", args[0], node.name, reply)
        return ok[0]

    async def _asking(self, exc: AskError, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
        """The slot is migrating and the key is on the importing node: ASKING and the
        command must share a connection, so they go in one write on a pooled one."""
        node = self.cluster.get_node(host=exc.host, port=exc.port)
        if node is None:
            self.refresh()
            raise RedisConnectionError(f"slot {exc.slot_id} is migrating to unknown node {exc.host}:{exc.port}")
        conn = node.acquire_connection()
        replies: list[Any] = []
        try:
            await conn.send_packed_command(conn.pack_commands([("ASKING",), args]))
            for raw in (False, bool(options.get(NEVER_DECODE))):
                try:
                    replies.append(await conn.read_response(disable_decoding=raw))
                except ResponseError as err:
                    replies.append(err)
        except BaseException:
            await conn.disconnect()  # a reply may still be owed on it
            raise
        finally:
            node.release(conn)
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies[1]

    async def aclose(self) -> None:
        self._closed = True
        if self._refreshing is not None:
            self._refreshing.cancel()
            await asyncio.gather(self._refreshing, return_exceptions=True)
        for pipe in self._pipes.values():
            await pipe.aclose()
        self._pipes.clear()


class ClusterBus:
    """Shard channels on the nodes serving their slots; same interface as NotificationBus.

    A node bus reports what may mean a channel lives elsewhere now: the server
    dropping a subscription (its slot moved), a refused SSUBSCRIBE (MOVED) or a lost
    connection. Each report re-reads the slot map; after every change of the map,
    channels whose owner changed are forgotten on the old node (which no longer
    holds them) and subscribed on the new one, whose confirmation makes their
    owners re-check what they may have missed.
    """

    def __init__(self, commands: ClusterCommands) -> None:
        self._commands = commands
        self._nodes: dict[str, tuple[aioredis.Redis, NotificationBus]] = {}
        self._subs: dict[str, tuple[Callable[[str], None], Callable[[], None]]] = {}
        self._homes: dict[str, str | None] = {}  # channel -> node it is subscribed on (None: nowhere)
        self._order = asyncio.Lock()  # subscribe, unsubscribe and moves one at a time
        self._moving: asyncio.Task[None] | None = None
        self._again = False
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False
        commands.add_listener(self._rehome_soon)

    # Same outcome reporting as NotificationBus (it only calls self.subscribe).
    subscribe_reporting = NotificationBus.subscribe_reporting

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
                await self._nodes[home][1].unsubscribe(channel)

    def _bus(self, node: ClusterNode) -> NotificationBus:
        entry = self._nodes.get(node.name)
        if entry is None:
            pool = aioredis.ConnectionPool(
                connection_class=node.connection_class, max_connections=2,
                **{**node.connection_kwargs,
                   "retry": Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), retries=1)},
            )
            client = aioredis.Redis(connection_pool=pool)
            name = node.name
            entry = self._nodes[name] = (client, NotificationBus(client, on_displaced=lambda c: self._displaced(name, c)))
        return entry[1]

    def _displaced(self, node_name: str, cause: str | BaseException) -> None:
        log.debug("notifications on %s displaced: %r", node_name, cause)
        if isinstance(cause, str) and self._homes.get(cause) == node_name:
            # The node dropped this subscription: resubscribe wherever the map says.
            self._nodes[node_name][1].forget(cause)
            self._homes[cause] = None
        self._commands.refresh()

    def _rehome_soon(self) -> None:
        if self._closed:
            return
        if self._moving is not None and not self._moving.done():
            self._again = True
            return
        self._moving = asyncio.create_task(self._rehome(), name="concord-cluster-rehome")

    async def _rehome(self) -> None:
        while True:
            self._again = False
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
                        self._nodes[home][1].forget(channel)  # that node no longer serves the slot
                    self._homes[channel] = None
                    try:
                        await self._bus(owner).subscribe(channel, on_message, on_subscribed)
                    except ConcordError as exc:
                        log.warning("moving notifications of %s to %s failed: %s", channel, owner.name, exc)
                        homeless = True
                    else:
                        self._homes[channel] = owner.name
                        log.debug("notifications of %s moved from %s to %s", channel, home, owner.name)
            if homeless and not self._closed:
                # Try again after the next read of the map (this one may predate the move).
                if self._retry is not None:
                    self._retry.cancel()
                self._retry = asyncio.get_running_loop().call_later(1.0, self._commands.refresh)
            if not self._again:
                return

    async def close(self) -> None:
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
        if self._moving is not None:
            self._moving.cancel()
            await asyncio.gather(self._moving, return_exceptions=True)
        for client, bus in self._nodes.values():
            await bus.close()
            await client.aclose()
        self._nodes.clear()
