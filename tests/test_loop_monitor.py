"""The event-loop stall monitor (loop_monitor.py) and its --loop-stall-report file."""

from __future__ import annotations

import gc
import json
import time

from concord_server import loop_monitor
from concord_server.loop_monitor import BOUNDS, LoopMonitor, percentile
from support import ServerProcess, async_wait_until, wait_until


def _read(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_percentiles_are_the_upper_bound_of_their_bucket():
    counts = [0] * (len(BOUNDS) + 1)
    counts[0], counts[BOUNDS.index(0.050)] = 98, 2  # 98 ticks under 1 ms, 2 in (20, 50] ms
    assert percentile(counts, 50, largest=0.031) == 0.001
    assert percentile(counts, 99, largest=0.031) == 0.031  # capped by the largest seen
    counts[-1] = 1  # one past the last bound: only the max describes it
    assert percentile(counts, 100, largest=7.5) == 7.5
    assert percentile([0] * len(counts), 99, largest=0.0) == 0.0


async def test_a_blocked_loop_shows_as_a_stall_in_the_report(tmp_path):
    path = tmp_path / "stalls.json"
    monitor = LoopMonitor(path, interval=0.005, window=0.05).start()
    try:
        await async_wait_until(lambda: _async(_read(path)), message="a first report")
        gc.collect()  # a full collection, timed through gc.callbacks
        time.sleep(0.3)  # holds the event loop: the stall under test
        # The timer was part-way through its interval when the loop stopped, so the
        # lateness is the stall less at most one interval.
        report = await async_wait_until(lambda: _async(_stalled(_read(path), 0.295)), message="the stall reported")
    finally:
        await monitor.aclose()
    assert report["max_s"] >= 0.295
    assert report["ticks"] == sum(report["counts"])
    assert report["gc_full"] >= 1 and 0 < report["gc_max_s"] <= report["gc_s"]
    assert sum(w["gc_full"] for w in report["windows"]) >= 1
    # The stall is in exactly the windows that saw it, and they are in time order.
    # A shared machine can add to the 0.3 s, so the tick may land in any bucket above it.
    stalled = [w for w in report["windows"] if w["max_s"] >= 0.295]
    assert len(stalled) == 1 and sum(stalled[0]["counts"][BOUNDS.index(0.5):]) == 1
    starts = [w["start"] for w in report["windows"]]
    assert starts == sorted(starts) and all(w["end"] > w["start"] for w in report["windows"])


def test_off_unless_a_report_file_is_named(tmp_path):
    assert loop_monitor.from_settings(None, workers=1) is None
    assert loop_monitor.from_settings("", workers=1) is None


def test_the_server_writes_the_report_file_it_is_given(redis_server, tmp_path):
    path = tmp_path / "stalls.json"
    server = ServerProcess("--redis-url", redis_server.url, "--loop-stall-report", str(path))
    server.start(tmp_path / "server.log")
    try:
        first = wait_until(lambda: _read(path), message="the server's stall report")
        assert first["pid"] == server.proc.pid
        later = wait_until(lambda: (r := _read(path)) and r["ticks"] > first["ticks"] and r, message="a newer report")
        assert len(later["windows"]) > len(first["windows"]) or later["windows"][-1] != first["windows"][-1]
    finally:
        assert server.stop() == 0, server.log_text()


def _stalled(report, at_least: float):
    return report if report and report["max_s"] >= at_least else None


async def _async(value):
    return value
