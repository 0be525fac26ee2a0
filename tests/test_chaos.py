"""The fault campaign (tests/chaos/): every service under load at once, against one
server and against three servers on one Redis, while Redis is killed (and restarted
from its append-only file), paused past the server's socket timeout, cut off through
a TCP proxy, and servers are killed; every call is recorded and the history checked
against docs/guarantees.md (tests/chaos/checker.py).

The short form runs in ``make test`` (>= 3 Redis kills, a pause, a cut and a server
kill, well under a minute each); ``make chaos`` runs the long form (several minutes,
>= 20 Redis kills per topology, pauses and cuts past the 5 s socket timeout and
liveness window). Both print their seed: ``CHAOS_SEED=<seed>`` replays the same fault
schedule (``CHAOS_SECONDS`` sets the long form's length). The summary (JSON) and the
whole history (JSON lines) are written to the test's tmp dir; the path is printed.
"""

from __future__ import annotations

import os
import shutil

import pytest

from chaos.campaign import Config, run, seed_from_env

TOPOLOGIES = pytest.mark.parametrize("servers", [1, 3], ids=["one-server", "three-servers"])
BACKEND = os.environ.get("CHAOS_BACKEND", "valkey")

SHORT_SECONDS = float(os.environ.get("CHAOS_SHORT_SECONDS", "16"))
SHORT_MINIMUM = {"redis_kill": 3, "redis_pause": 1, "link_cut": 1, "server_kill": 1}

LONG_SECONDS = float(os.environ.get("CHAOS_SECONDS", "180"))
LONG_MINIMUM = {"redis_kill": 20, "redis_pause": 3, "link_cut": 3, "server_kill": 3}


def _skip_without_backend() -> None:
    from support import backend_binary

    if backend_binary(BACKEND) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{BACKEND} server is not installed; CI must run the fault campaign")
        pytest.skip(f"{BACKEND} server not installed")


@TOPOLOGIES
@pytest.mark.timeout(100)
def test_chaos_short(servers, tmp_path, request):
    _skip_without_backend()
    seed = seed_from_env()
    cfg = Config(seed=seed, servers=servers, seconds=SHORT_SECONDS, minimum=SHORT_MINIMUM, backend=BACKEND,
                 rerun=f"CHAOS_SEED={seed} .venv/bin/pytest 'tests/test_chaos.py::{request.node.name}'")
    report = run(cfg, tmp_path)
    faults = report.summary()["faults_done"]
    assert faults["redis_kill"] >= 3 and min(faults.values()) >= 1 or not report.ok, faults
    assert report.ok, report.failure()
    shutil.rmtree(tmp_path / "redis", ignore_errors=True)  # its AOF: the summary and history stay


@pytest.mark.chaos
@TOPOLOGIES
@pytest.mark.timeout(int(LONG_SECONDS) + 400)
def test_chaos_long(servers, tmp_path, request):
    _skip_without_backend()
    seed = seed_from_env()
    cfg = Config(seed=seed, servers=servers, seconds=LONG_SECONDS, minimum=LONG_MINIMUM, long=True,
                 long_pauses=2, long_cuts=2, backend=BACKEND,
                 rerun=f"CHAOS_SEED={seed} CHAOS_SECONDS={LONG_SECONDS:g} make chaos "
                       f"PYTEST_ARGS='-k {'one' if servers == 1 else 'three'}'")
    report = run(cfg, tmp_path)
    faults = report.summary()["faults_done"]
    assert faults["redis_kill"] >= 20 and min(faults.values()) >= 3 or not report.ok, faults
    assert report.ok, report.failure()
    shutil.rmtree(tmp_path / "redis", ignore_errors=True)
