"""Redis Sentinel (--redis-url redis+sentinel://...): the server asks the Sentinels
for the primary on every new connection, checks ROLE, and follows a failover by
itself, whether the old primary dies (SIGKILL), is demoted while alive (SENTINEL
FAILOVER: its links are dropped on +switch-master, and a READONLY reply drops a link
too), or is not known yet when the server starts. Real processes: a primary, two
replicas and three Sentinels on free loopback ports (sentinel_topology.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import redis
from grpc_health.v1 import health_pb2

import concord
from concord_server.store.link import Endpoint
from support import ServerProcess, backend_binary, wait_until
from sentinel_topology import SERVICE, Sentinel, SentinelTopology

# Failovers against deadlines, with waiters moved in time: run alone after the rest
# (make test); beside another worker a follow-up count came late.
pytestmark = pytest.mark.serial

FAILOVER_DEADLINE = 40.0  # seconds: Sentinel's down-after (1 s), election and promotion, on a busy 2-core machine


@pytest.fixture
def topology(backend, tmp_path):
    topo = SentinelTopology(backend_binary(backend), tmp_path / "redis").start()
    yield topo
    topo.stop()


@pytest.fixture
def server(topology, tmp_path):
    s = ServerProcess("--redis-url", topology.url(), "--log-level", "INFO").start(tmp_path / "server.log")
    yield s
    s.stop()


def test_sentinel_urls_are_parsed_with_their_own_credentials():
    e = Endpoint.from_url("redis+sentinel://u:p%40ss@10.0.0.1:26379,10.0.0.2:26380/orders/3"
                          "?sentinel_password=sp&sentinel_username=su")
    assert e.sentinels is not None
    assert e.sentinels.nodes == (("10.0.0.1", 26379), ("10.0.0.2", 26380))
    assert (e.sentinels.service, e.sentinels.username, e.sentinels.password) == ("orders", "su", "sp")
    assert (e.username, e.password, e.db, e.ssl) == ("u", "p@ss", 3, None)
    tls = Endpoint.from_url("rediss+sentinel://h:1/svc?ssl_cert_reqs=none")
    assert tls.ssl is not None and tls.sentinels.service == "svc" and tls.password is None
    for bad in ["redis+sentinel://h:1", "redis+sentinel://h/svc", "redis+sentinel://h:1,:2/svc"]:
        with pytest.raises(ValueError):
            Endpoint.from_url(bad)


def _until_served(call, deadline: float) -> tuple[object, list[str]]:
    """call() until it succeeds (before the deadline); every failure's class name."""
    failures: list[str] = []
    end = time.monotonic() + deadline
    while True:
        try:
            return call(), failures
        except concord.ConcordError as exc:
            failures.append(type(exc).__name__ + ":" + exc.code.name)
            assert time.monotonic() < end, f"not served within {deadline}s of the failover: {failures[-5:]}"
            time.sleep(0.05)


def test_a_killed_primary_is_followed_to_the_promoted_replica_with_waiters_moved(topology, server, name):
    with concord.Client(server.target, timeout=5) as client:
        before = client.queue(name).put("t", b"before").task_id
        holder = client.lock(f"{name}-lock", ttl=60).acquire()
        assert holder is not None
        got: list[object] = []
        waiter = threading.Thread(target=lambda: got.append(client.lock(f"{name}-lock", ttl=60).acquire(
            timeout=FAILOVER_DEADLINE + 20)))
        waiter.start()
        wait_until(lambda: client.lock(f"{name}-lock").describe().waiters == 1, message="the waiter to queue")
        old = topology.primary()
        assert old.client().wait(2, 5000) == 2  # what was acknowledged is on both replicas
        old.kill()
        _, failures = _until_served(lambda: client.queue(name).put("t", b"after"), FAILOVER_DEADLINE)
        assert all(f.endswith(":UNAVAILABLE") for f in failures), failures
        new = topology.primary()
        assert new is not old and topology.role(new) == "master"
        tasks = client.queue(name).get(max_tasks=10, timeout=5)
        assert before in {t.task_id for t in tasks} and len(tasks) == 2
        client.lock(f"{name}-lock").release(holder)  # on the new primary: wakes the waiter parked before the kill
        waiter.join(FAILOVER_DEADLINE)
        assert got and got[0] is not None and got[0].fencing_token > holder.fencing_token
    assert "INTERNAL" not in server.log_text() and "Traceback" not in server.log_text()


def _clients_of(node) -> list[str]:
    """Client connections on a node other than replication, Sentinels and this query
    (["?"] while the node does not answer)."""
    try:
        with node.client() as c:
            listed = c.client_list()
    except redis.RedisError:
        return ["?"]
    return [cl["addr"] for cl in listed
                if not set(cl.get("flags", "")) & {"S", "M"} and not cl.get("name", "").startswith("sentinel")
                and cl.get("cmd") not in ("client|list", "client")]


def test_a_demoted_primary_is_left_at_once_and_written_to_no_more(topology, server, name):
    """SENTINEL FAILOVER demotes a live primary. Without replica acks a write the old
    primary acknowledged in the moment between the promotion and its demotion may be
    lost (guarantees.md); what was on the replicas before stays, and once the server
    has left the old primary every write lands on the new one."""
    with concord.Client(server.target, timeout=5) as client:
        client.queue(name).put("t", b"before")
        old = topology.primary()
        assert old.client().wait(2, 5000) == 2
        wait_until(lambda: len(_clients_of(old)) >= 2, message="the server's command and pub/sub links on the primary")
        with topology.sentinels[0].client() as s:
            s.execute_command("SENTINEL", "FAILOVER", SERVICE)
        wait_until(lambda: topology.role(old) == "slave", timeout=FAILOVER_DEADLINE,
                   message="Sentinel to demote the primary")
        new = topology.primary()
        assert new is not old
        wait_until(lambda: not _clients_of(old), timeout=10,
                   message=f"the server to leave the demoted primary (still: {_clients_of(old)})")
        _, failures = _until_served(lambda: client.queue(name).put("t", b"after"), FAILOVER_DEADLINE)
        assert all(f.endswith(":UNAVAILABLE") for f in failures), failures
        payloads = {t.payload for t in client.queue(name).get(max_tasks=10, timeout=5)}
        assert {b"before", b"after"} <= payloads
        assert not _clients_of(old)
    assert "INTERNAL" not in server.log_text()


def test_a_server_started_before_any_sentinel_answers_serves_once_one_does(backend, tmp_path, name):
    topo = SentinelTopology(backend_binary(backend), tmp_path / "redis")
    for node in topo.nodes:
        node.start()
    topo.sentinels = [Sentinel(topo.binary, tmp_path / f"sentinel-{i}", topo.nodes[0].port) for i in range(3)]
    s = ServerProcess("--redis-url", topo.url(), "--log-level", "INFO")
    try:
        with open(tmp_path / "server.log", "ab") as log:  # started without waiting for SERVING
            s.log_path = tmp_path / "server.log"
            s.proc = subprocess.Popen([sys.executable, "-m", "concord_server", *s.args], stdout=log,
                                      stderr=subprocess.STDOUT, env=s.env)
        wait_until(lambda: s.health() == health_pb2.HealthCheckResponse.NOT_SERVING, timeout=30,
                   message="health NOT_SERVING while no Sentinel answers")
        for sentinel in topo.sentinels:
            sentinel.start()
        wait_until(lambda: s.health() == health_pb2.HealthCheckResponse.SERVING, timeout=30,
                   message="health SERVING once the Sentinels name a primary")
        with concord.Client(s.target, timeout=5) as client:
            assert client.lock(name).acquire() is not None
    finally:
        s.stop()
        topo.stop()
