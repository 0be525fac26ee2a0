"""The fault campaign (tests/chaos/): every service under load at once, against one
server and against three servers on one Redis, while Redis is killed (and restarted
from its append-only file), paused past the server's socket timeout, cut off through
a TCP proxy, servers are killed and two busy-loop processes compete for the CPU; the
queue workloads alone against a three-node Redis Cluster while the slots of their
queues migrate under Consume streams; and every service against failovers: a Redis
Cluster of three primaries with a replica each whose primaries are SIGKILLed, and a
primary with two replicas under three Sentinels whose primary is SIGKILLed, each with
and without --redis-replica-acks (without, what the promoted replica lacked is
counted as the measured loss, not failed). Every call is recorded and the history
checked against docs/guarantees.md (tests/chaos/checker.py); a failover run also
reports the store's own failover time and the first success after each kill.

The short form runs in ``make test`` (>= 3 Redis kills, a pause, a cut, a server
kill and CPU pressure, the one-server run with the busy loops throughout; on the
cluster >= 3 slot moves; with replica acks, >= 2 Sentinel failovers and >= 2
cluster primary kills; about a minute each); ``make chaos`` runs the long form
(several minutes, >= 20 Redis kills per topology, pauses and cuts past the 5 s
socket timeout and liveness window, a one-server run with the busy loops beside it
throughout, >= 20 slot moves on the cluster, >= 12 failovers per failover topology)
and the short failover runs without replica acks and on Debian's Redis. Both
print their seed: ``CHAOS_SEED=<seed>`` replays the same fault schedule
(``CHAOS_SECONDS`` sets the long form's length). The summary (JSON) and the whole
history (JSON lines) are written to the test's tmp dir; the path is printed.
"""

from __future__ import annotations

import os
import shutil

import pytest

from chaos.campaign import Config, run, seed_from_env

# Its rules bound answer times and lease lifetimes: run alone after the rest (make test);
# beside other test workers on two cores a short run broke blocked_calls_answer_in_time.
pytestmark = pytest.mark.serial

# The one-server short run has the two busy loops beside it throughout: issue 30's
# double lease showed under a Redis flap only with CPU pressure (the old code failed 3
# runs in 3 so, 2 in 6 without).
TOPOLOGIES = pytest.mark.parametrize("servers,cpu_hogs", [(1, True), (3, False)],
                                     ids=["one-server-cpu", "three-servers"])
BACKEND = os.environ.get("CHAOS_BACKEND", "valkey")

SHORT_SECONDS = float(os.environ.get("CHAOS_SHORT_SECONDS", "16"))
SHORT_MINIMUM = {"redis_kill": 3, "redis_pause": 1, "link_cut": 1, "server_kill": 1, "cpu_pressure": 1}
SHORT_CLUSTER_SECONDS = float(os.environ.get("CHAOS_SHORT_CLUSTER_SECONDS", "10"))
SHORT_CLUSTER_MINIMUM = {"slot_move": 3}

LONG_SECONDS = float(os.environ.get("CHAOS_SECONDS", "180"))
LONG_MINIMUM = {"redis_kill": 20, "redis_pause": 3, "link_cut": 3, "server_kill": 3, "cpu_pressure": 3}
LONG_CLUSTER_MINIMUM = {"slot_move": 20, "cpu_pressure": 2}


def _skip_without_backend(backend: str = BACKEND) -> None:
    from support import backend_binary

    if backend_binary(backend) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{backend} server is not installed; CI must run the fault campaign")
        pytest.skip(f"{backend} server not installed")


@TOPOLOGIES
@pytest.mark.timeout(100)
def test_chaos_short(servers, cpu_hogs, tmp_path, request):
    _skip_without_backend()
    seed = seed_from_env()
    cfg = Config(seed=seed, servers=servers, seconds=SHORT_SECONDS, minimum=SHORT_MINIMUM, backend=BACKEND,
                 cpu_hogs=cpu_hogs,
                 rerun=f"CHAOS_SEED={seed} .venv/bin/pytest 'tests/test_chaos.py::{request.node.name}'")
    report = run(cfg, tmp_path)
    faults = report.summary()["faults_done"]
    assert faults["redis_kill"] >= 3 and all(faults[k] >= 1 for k in SHORT_MINIMUM) or not report.ok, faults
    assert report.ok, report.failure()
    _drop_data(tmp_path)


@pytest.mark.timeout(100)
def test_chaos_short_cluster(tmp_path, request):
    """Consume streams over several queues and Dequeue workers while the queues' slots
    migrate (ASK, TRYAGAIN mid-claim): no double lease, no task dead undelivered."""
    _skip_without_backend()
    seed = seed_from_env()
    cfg = Config(seed=seed, servers=1, seconds=SHORT_CLUSTER_SECONDS, minimum=SHORT_CLUSTER_MINIMUM,
                 backend=BACKEND, topology="cluster",
                 rerun=f"CHAOS_SEED={seed} .venv/bin/pytest 'tests/test_chaos.py::{request.node.name}'")
    report = run(cfg, tmp_path)
    assert report.summary()["faults_done"]["slot_move"] >= 3 or not report.ok, report.summary()["faults_done"]
    assert report.ok, report.failure()
    _drop_data(tmp_path)


SHORT_SENTINEL_SECONDS = float(os.environ.get("CHAOS_SHORT_SENTINEL_SECONDS", "10"))
SHORT_SENTINEL_MINIMUM = {"failover": 2}
LONG_SENTINEL_MINIMUM = {"failover": 12, "primary_pause": 3, "primary_cut": 3, "server_kill": 2, "cpu_pressure": 2}


# In `make test`: acks from both replicas on Valkey. The others (Debian's redis-server
# and redis-sentinel; acks from one replica of two, or none: a measured loss) in
# `make chaos`. One replica's ack survives one failover, not Sentinel failing over
# again before the other replica caught up (a long run lost 208 messages and tasks).
SENTINEL_RUNS = [
    pytest.param(2, "valkey", id="replica-acks-valkey"),
    pytest.param(2, "redis", id="replica-acks-debian-redis", marks=pytest.mark.chaos),
    pytest.param(1, "valkey", id="one-replica-ack-valkey", marks=pytest.mark.chaos),
    pytest.param(0, "valkey", id="no-acks-valkey", marks=pytest.mark.chaos),
    pytest.param(0, "redis", id="no-acks-debian-redis", marks=pytest.mark.chaos),
]


@pytest.mark.parametrize("acks,store", SENTINEL_RUNS)
@pytest.mark.timeout(150)
def test_chaos_short_sentinel(acks, store, tmp_path, request):
    """Every service on two servers behind Redis Sentinel (a primary, two replicas,
    three Sentinels), while the primary is killed and a replica promoted. With
    --redis-replica-acks 2 (every replica) nothing acknowledged is lost and every rule
    holds; with fewer, what the promoted replica had not received is counted as the
    measured loss."""
    _failover_run("sentinel", "failover", store, acks, SHORT_SENTINEL_SECONDS, SHORT_SENTINEL_MINIMUM, tmp_path,
                  request)


@pytest.mark.chaos
@pytest.mark.parametrize("acks", [2, 1, 0], ids=["replica-acks", "one-replica-ack", "no-acks"])
# Each fault heals once the old primary has rejoined as a synced replica, 20-40 s on 2
# cores under the load (and Sentinel's own extra failovers, with down-after 1 s, add
# their resyncs): the 22 faults of a run took more than 30 minutes.
@pytest.mark.timeout(int(LONG_SECONDS) + 3600)
def test_chaos_long_sentinel(acks, tmp_path, request):
    _failover_run("sentinel", "failover", BACKEND, acks, LONG_SECONDS, LONG_SENTINEL_MINIMUM, tmp_path, request,
                  long=True)


SHORT_CLUSTER_FAILOVER_SECONDS = float(os.environ.get("CHAOS_SHORT_CLUSTER_FAILOVER_SECONDS", "8"))
SHORT_CLUSTER_FAILOVER_MINIMUM = {"primary_kill": 2}
LONG_CLUSTER_FAILOVER_MINIMUM = {"primary_kill": 12, "server_kill": 2, "cpu_pressure": 2}


@pytest.mark.parametrize("acks", [1, pytest.param(0, marks=pytest.mark.chaos)], ids=["replica-acks", "no-acks"])
@pytest.mark.timeout(150)
def test_chaos_short_cluster_failover(acks, tmp_path, request):
    """Every service on a Redis Cluster of three primaries with a replica each, while the
    primary serving a queue's slot is SIGKILLed and its replica takes over."""
    _failover_run("cluster-failover", "primary_kill", BACKEND, acks, SHORT_CLUSTER_FAILOVER_SECONDS,
                  SHORT_CLUSTER_FAILOVER_MINIMUM, tmp_path, request)


@pytest.mark.chaos
@pytest.mark.parametrize("acks", [1, 0], ids=["replica-acks", "no-acks"])
@pytest.mark.timeout(int(LONG_SECONDS) + 600)
def test_chaos_long_cluster_failover(acks, tmp_path, request):
    _failover_run("cluster-failover", "primary_kill", BACKEND, acks, LONG_SECONDS, LONG_CLUSTER_FAILOVER_MINIMUM,
                  tmp_path, request, long=True)


def _failover_run(topology: str, kind: str, backend: str, acks: int, seconds: float, minimum: dict[str, int],
                  tmp_path, request, long: bool = False) -> None:
    """One failover campaign (Sentinel, or a cluster with replicas): at least
    minimum[kind] failovers done, and every rule holding (without replica acks, the
    state rules' violations are the measured loss: campaign.Report.losses)."""
    _skip_without_backend(backend)
    seed = seed_from_env()
    test = request.node.name
    rerun = (f"CHAOS_SEED={seed} CHAOS_SECONDS={seconds:g} make chaos PYTEST_ARGS=\"-k '{test}'\"" if long
             else f"CHAOS_SEED={seed} .venv/bin/pytest 'tests/test_chaos.py::{test}'")
    cfg = Config(seed=seed, servers=3 if long else 2, seconds=seconds, minimum=minimum, long=long, backend=backend,
                 topology=topology, replica_acks=acks, rerun=rerun)
    report = run(cfg, tmp_path)
    faults = report.summary()["faults_done"]
    assert faults[kind] >= minimum[kind] or not report.ok, faults
    assert report.ok, report.failure()
    _drop_data(tmp_path)


def _drop_data(tmp_path) -> None:
    """Redis's files (AOF, cluster nodes): the summary and history stay."""
    shutil.rmtree(tmp_path / "redis", ignore_errors=True)
    shutil.rmtree(tmp_path / "cluster", ignore_errors=True)
    shutil.rmtree(tmp_path / "sentinel", ignore_errors=True)


LONG_TOPOLOGIES = pytest.mark.parametrize(
    "servers,cpu_hogs", [(1, False), (3, False), (1, True)], ids=["one-server", "three-servers", "one-server-cpu"])


@pytest.mark.chaos
@LONG_TOPOLOGIES
@pytest.mark.timeout(int(LONG_SECONDS) + 400)
def test_chaos_long(servers, cpu_hogs, tmp_path, request):
    _skip_without_backend()
    seed = seed_from_env()
    cfg = Config(seed=seed, servers=servers, seconds=LONG_SECONDS, minimum=LONG_MINIMUM, long=True,
                 long_pauses=2, long_cuts=2, backend=BACKEND, cpu_hogs=cpu_hogs,
                 rerun=f"CHAOS_SEED={seed} CHAOS_SECONDS={LONG_SECONDS:g} make chaos "
                       f"PYTEST_ARGS=\"-k '{request.node.callspec.id}'\"")
    report = run(cfg, tmp_path)
    faults = report.summary()["faults_done"]
    assert faults["redis_kill"] >= 20 and all(faults[k] >= 3 for k in LONG_MINIMUM) or not report.ok, faults
    assert report.ok, report.failure()
    _drop_data(tmp_path)


@pytest.mark.chaos
@pytest.mark.timeout(int(LONG_SECONDS) + 400)
def test_chaos_long_cluster(tmp_path, request):
    _skip_without_backend()
    seed = seed_from_env()
    cfg = Config(seed=seed, servers=2, seconds=LONG_SECONDS, minimum=LONG_CLUSTER_MINIMUM, long=True,
                 backend=BACKEND, topology="cluster",
                 rerun=f"CHAOS_SEED={seed} CHAOS_SECONDS={LONG_SECONDS:g} make chaos PYTEST_ARGS='-k cluster'")
    report = run(cfg, tmp_path)
    faults = report.summary()["faults_done"]
    assert faults["slot_move"] >= 20 or not report.ok, faults
    assert report.ok, report.failure()
    _drop_data(tmp_path)
