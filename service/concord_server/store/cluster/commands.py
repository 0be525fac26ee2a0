"""Redis Cluster commands: every command goes to the primary serving its key's slot.

redis-py's RedisCluster keeps the slot map (discovery from any node, auth, TLS,
MOVED bookkeeping); ``ClusterCommands`` adds the routing the hot path needs on top
of it, with AutoPipeline's interface over one AutoPipeline (one link.Link) per
primary: EVALSHA goes by its first key (all keys of a script share a hash tag, so
one slot), a plain command by its key, SCRIPT LOAD to every primary. MOVED updates
the map and the command is retried once on the new owner; ASK is answered on the
importing node after ASKING; TRYAGAIN (a multi-key command while its slot is half
moved: nothing ran) is sent again after short pauses (0.15 s in all), so a slot move
is not an error to the caller; a connection error re-reads the whole map in the
background. The standalone path never comes here. Pub/sub routing: store/cluster/bus.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode
from redis.client import NEVER_DECODE
from redis.exceptions import AskError, MovedError, RedisClusterException, RedisError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..autopipeline import SEEN_MARK_MS, AutoPipeline
from ..link import Endpoint
from .rerun import Rerun

log = logging.getLogger(__name__)

_SCRIPT_CALLS = frozenset({"EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO", "FCALL", "FCALL_RO"})
_EVERY_PRIMARY = frozenset({"SCRIPT"})
_REFRESH_GAP = 0.1  # seconds between slot map reads while errors keep asking for one
_TRYAGAIN_PAUSES = (0.01, 0.02, 0.04, 0.08)  # seconds (0.15 in all, well inside a blocked call's 0.5 s slack); then UNAVAILABLE


def _command_key(args: tuple[Any, ...]) -> Any:
    """The key that picks the slot: a script's first key, else the first argument."""
    if args[0].upper() in _SCRIPT_CALLS:
        return args[3] if int(args[2]) > 0 else None
    return args[1] if len(args) > 1 else None


class ClusterCommands:
    def __init__(self, cluster: aioredis.RedisCluster, endpoint: Endpoint) -> None:
        self.cluster = cluster
        self.endpoint = endpoint  # the URL's node: credentials and TLS for every node
        self._pipes: dict[str, AutoPipeline] = {}  # node name -> its pipeline
        self._started = False
        self._starting = asyncio.Lock()
        self._refresher = Rerun(self._reread, "concord-cluster-refresh", gap=_REFRESH_GAP)
        self._listeners: list[Callable[[], None]] = []
        self._watchers: list[Callable[[BaseException], None]] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if not self._started:
            await self.start()
        if args[0] in _EVERY_PRIMARY:
            return await self._on_every_primary(*args, **options)
        for pause in _TRYAGAIN_PAUSES:
            try:
                return await self._routed(args, options)
            except TryAgainError:
                log.debug("TRYAGAIN (slot half moved): again in %.2fs", pause)
                await asyncio.sleep(pause)
        return await self._routed(args, options)

    async def _routed(self, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
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

    async def confirm_seen(self, key: str) -> None:
        """AutoPipeline.confirm_seen on the node serving key."""
        if self.endpoint.replica_acks is None:
            return
        await self.execute_command("SET", key, "1", "PX", SEEN_MARK_MS)

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
        self._refresher.request()

    async def _reread(self) -> None:
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

    def _notify(self) -> None:
        for on_change in self._listeners:
            on_change()

    def _pipe(self, node: ClusterNode) -> AutoPipeline:
        pipe = self._pipes.get(node.name)
        if pipe is None:
            # A dead node fails fast (one connect attempt): the caller's error
            # triggers a map refresh, and the next command may go elsewhere.
            pipe = self._pipes[node.name] = AutoPipeline(self.endpoint.at(node.host, node.port))
            for watcher in self._watchers:
                pipe.on_lost(watcher)
        return pipe

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        """callback(error) runs each time a connection to any node is lost."""
        self._watchers.append(callback)
        for pipe in self._pipes.values():
            pipe.on_lost(callback)

    def reset(self, reason: str, key: Any = None) -> None:
        """Drops the connection to the node serving key (what is in flight on it fails)."""
        pipe = self._pipes.get(self.owner(key).name)
        if pipe is not None:
            pipe.reset(reason)

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
        """The slot is migrating and the key is on the importing node: ASKING applies to
        the next command on its connection, so the two go out back to back."""
        node = self.cluster.get_node(host=exc.host, port=exc.port)
        if node is None:
            self.refresh()
            raise RedisConnectionError(f"slot {exc.slot_id} is migrating to unknown node {exc.host}:{exc.port}")
        _, reply = await self._pipe(node).execute_adjacent([("ASKING",), args], raw=bool(options.get(NEVER_DECODE)))
        return reply

    async def aclose(self) -> None:
        await self._refresher.close()
        for pipe in self._pipes.values():
            await pipe.aclose()
        self._pipes.clear()
