"""Recurring schedules through a real concord-server: CRUD, ticks enqueued once and
never early, pause/resume, missed-tick policies, and the calendar arithmetic
(cron with seconds and time zones, daylight saving) on its own."""

from __future__ import annotations

import datetime
import random
import zoneinfo
from collections import Counter

import grpc
import pytest
from croniter import croniter
from google.protobuf import duration_pb2

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from concord_server.keys import KeySpace
from concord_server.primitives.schedule_times import MAX_RUNS_PER_CLAIM, BadTiming, Timing, plan
from support import error_info, wait_until


def d(seconds: float) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=int(seconds), nanos=int(seconds % 1 * 1e9))


@pytest.fixture
def stub(concord_server):
    with grpc.insecure_channel(concord_server.target) as ch:
        yield queue_pb2_grpc.QueueServiceStub(ch)


def every(seconds: float, **kw) -> pb.ScheduleSpec:
    return pb.ScheduleSpec(every=d(seconds), type=kw.pop("type", "tick"), **kw)


def scheduled_tasks(stub, queue: str) -> list[pb.Task]:
    tasks = stub.Peek(pb.PeekRequest(queue=queue, state=pb.TASK_STATE_READY, limit=1000)).tasks
    return [stub.GetTask(pb.GetTaskRequest(queue=queue, task_id=t.task_id)).task for t in tasks]


def ms(ts) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def test_a_schedule_ticks_once_per_tick_never_early_and_reports_itself(stub, name):
    s = stub.CreateSchedule(pb.CreateScheduleRequest(queue=name, name="beat", spec=every(0.2 * 5, payload=b"p",
                                                                                          priority=4))).schedule
    assert (s.queue, s.name, s.paused, s.runs, s.version) == (name, "beat", False, 0, 1)
    anchor = ms(s.spec.start_at)
    assert ms(s.next_run_at) == anchor + 1000 and 0 <= ms(s.created_at) - anchor < 1000
    wait_until(lambda: len(scheduled_tasks(stub, name)) >= 2, timeout=15, message="two ticks")
    tasks = scheduled_tasks(stub, name)
    ticks = [ms(t.scheduled_at) for t in tasks]
    assert ticks == sorted(set(ticks)), "one task per tick"
    assert all((tick - anchor) % 1000 == 0 for tick in ticks)
    leased = stub.Dequeue(pb.DequeueRequest(queues=[name], max_tasks=1)).tasks[0]
    assert (leased.schedule, leased.scheduled_at) == (tasks[0].schedule, tasks[0].scheduled_at), "workers see it"
    for t in tasks:
        assert (t.schedule, t.type, t.payload, t.priority) == ("beat", "tick", b"p", 4)
        assert ms(t.enqueued_at) >= ms(t.scheduled_at), "a tick ran early"
    got = stub.GetSchedule(pb.GetScheduleRequest(queue=name, name="beat")).schedule
    assert got.runs >= 2 and got.last_task_id in {t.task_id for t in tasks}
    assert ms(got.next_run_at) > ms(got.last_run_at)


def test_create_update_pause_resume_delete_and_list(stub, name):
    stub.CreateSchedule(pb.CreateScheduleRequest(queue=name, name="a", spec=every(3600)))
    stub.CreateSchedule(pb.CreateScheduleRequest(
        queue=name, name="b", spec=pb.ScheduleSpec(cron="0 0 3 * * *", time_zone="Europe/Berlin", type="t")))
    with pytest.raises(grpc.RpcError) as err:
        stub.CreateSchedule(pb.CreateScheduleRequest(queue=name, name="a", spec=every(5)))
    assert (err.value.code(), error_info(err.value).reason) == (grpc.StatusCode.ALREADY_EXISTS, "SCHEDULE_EXISTS")
    listed = stub.ListSchedules(pb.ListSchedulesRequest(queue=name)).schedules
    assert [s.name for s in listed] == sorted(["a", "b"], key=lambda n: ms(next(
        s for s in listed if s.name == n).next_run_at))
    berlin = datetime.datetime.fromtimestamp(ms(next(s for s in listed if s.name == "b").next_run_at) / 1000,
                                             zoneinfo.ZoneInfo("Europe/Berlin"))
    assert (berlin.hour, berlin.minute, berlin.second) == (3, 0, 0)

    paused = stub.PauseSchedule(pb.PauseScheduleRequest(queue=name, name="a")).schedule
    assert paused.paused and not paused.HasField("next_run_at") and paused.version == 2
    listed = stub.ListSchedules(pb.ListSchedulesRequest(queue=name)).schedules
    assert [s.name for s in listed] == ["b", "a"], "paused ones last"
    resumed = stub.ResumeSchedule(pb.ResumeScheduleRequest(queue=name, name="a")).schedule
    assert not resumed.paused and resumed.HasField("next_run_at")

    updated = stub.UpdateSchedule(pb.UpdateScheduleRequest(queue=name, name="a", spec=every(60, type="u"),
                                                           paused=True)).schedule
    assert (updated.spec.type, updated.spec.every.seconds, updated.paused) == ("u", 60, True)
    page = stub.ListSchedules(pb.ListSchedulesRequest(queue=name, page_size=1))
    assert [s.name for s in page.schedules] == ["b"] and page.next_page_token
    rest = stub.ListSchedules(pb.ListSchedulesRequest(queue=name, page_size=1, page_token=page.next_page_token))
    assert [s.name for s in rest.schedules] == ["a"] and rest.next_page_token
    end = stub.ListSchedules(pb.ListSchedulesRequest(queue=name, page_size=1, page_token=rest.next_page_token))
    assert (list(end.schedules), end.next_page_token) == ([], "")
    with pytest.raises(grpc.RpcError) as err:
        stub.ListSchedules(pb.ListSchedulesRequest(queue=name, page_token="7"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    stub.DeleteSchedule(pb.DeleteScheduleRequest(queue=name, name="a"))
    for call, request in (("GetSchedule", pb.GetScheduleRequest), ("DeleteSchedule", pb.DeleteScheduleRequest),
                          ("PauseSchedule", pb.PauseScheduleRequest), ("ResumeSchedule", pb.ResumeScheduleRequest)):
        with pytest.raises(grpc.RpcError) as err:
            getattr(stub, call)(request(queue=name, name="a"))
        assert (err.value.code(), error_info(err.value).reason) == (grpc.StatusCode.NOT_FOUND, "SCHEDULE_NOT_FOUND")
    with pytest.raises(grpc.RpcError) as err:
        stub.UpdateSchedule(pb.UpdateScheduleRequest(queue=name, name="a", spec=every(5)))
    assert error_info(err.value).reason == "SCHEDULE_NOT_FOUND"
    assert [s.name for s in stub.ListSchedules(pb.ListSchedulesRequest(queue=name)).schedules] == ["b"]


def test_a_paused_schedule_enqueues_nothing(stub, name):
    stub.CreateSchedule(pb.CreateScheduleRequest(queue=name, name="p", spec=every(1), paused=True))
    stub.CreateSchedule(pb.CreateScheduleRequest(queue=name, name="marker", spec=every(1)))
    # Two ticks of the active schedule prove the ticker passed the paused one's ticks too.
    wait_until(lambda: sum(t.schedule == "marker" for t in scheduled_tasks(stub, name)) >= 2, timeout=15,
               message="marker ticks")
    assert not [t for t in scheduled_tasks(stub, name) if t.schedule == "p"]


@pytest.mark.parametrize("spec, field", [
    (pb.ScheduleSpec(type="t"), "spec.cron"),
    (pb.ScheduleSpec(cron="61 * * * * *", type="t"), "spec.cron"),
    (pb.ScheduleSpec(cron="* * *", type="t"), "spec.cron"),
    (pb.ScheduleSpec(cron="* * * * *", time_zone="Mars/Olympus", type="t"), "spec.time_zone"),
    (pb.ScheduleSpec(cron="* * * * *", type=""), "spec.type"),
    (pb.ScheduleSpec(every=d(0.5), type="t"), "spec.every"),
    (pb.ScheduleSpec(every=d(5), time_zone="UTC", type="t"), "spec.time_zone"),
    (pb.ScheduleSpec(cron="* * * * *", start_at={"seconds": 5}, type="t"), "spec.start_at"),
    (pb.ScheduleSpec(every=d(5), grace=d(7200), type="t"), "spec.grace"),
    (pb.ScheduleSpec(every=d(5), priority=5000, type="t"), "spec.priority"),
    (pb.ScheduleSpec(every=d(5), missed=7, type="t"), "spec.missed"),
])
def test_bad_schedules_are_invalid_argument_and_change_nothing(stub, name, spec, field):
    with pytest.raises(grpc.RpcError) as err:
        stub.CreateSchedule(pb.CreateScheduleRequest(queue=name, name="s", spec=spec))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert dict(error_info(err.value).metadata).get("field") == field
    assert not stub.ListSchedules(pb.ListSchedulesRequest(queue=name)).schedules


def test_a_huge_cron_an_older_server_stored_is_paused_not_evaluated(stub, name, redis_sync, concord_server):
    """Schedules live in Redis, so one written before cron expressions were bounded
    (here: the issue's 566,669-character every-second cron, put in its hash by hand)
    reaches every replica. The ticker pauses it without parsing it (parsing it took
    1.3 s of the event loop per tick), Get still shows it, and Resume refuses it
    until UpdateSchedule gives it a timing that can tick."""
    stub.CreateSchedule(pb.CreateScheduleRequest(queue=name, name="legacy", spec=pb.ScheduleSpec(
        cron="* * * * * *", type="t")))
    huge = (",".join(str(i % 60) for i in range(200_000)))[:566_660] + " * * * * *"
    redis_sync.hset(KeySpace("concord").queue(name).schedule_prefix + "legacy", "cron", huge)
    got = wait_until(lambda: (s := stub.GetSchedule(pb.GetScheduleRequest(queue=name, name="legacy")).schedule).paused
                     and s, timeout=15, message="the ticker pauses the schedule")
    assert got.spec.cron == huge and not got.HasField("next_run_at")
    with pytest.raises(grpc.RpcError) as err:
        stub.ResumeSchedule(pb.ResumeScheduleRequest(queue=name, name="legacy"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, err.value.details()
    assert "cannot tick" in concord_server.log_text()
    fixed = stub.UpdateSchedule(pb.UpdateScheduleRequest(queue=name, name="legacy", spec=pb.ScheduleSpec(
        cron="0 0 1 1 *", type="t"), paused=False)).schedule
    assert not fixed.paused and fixed.HasField("next_run_at")
    stub.DeleteSchedule(pb.DeleteScheduleRequest(queue=name, name="legacy"))


# -- the calendar, on its own -----------------------------------------------------

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def at(*args) -> int:
    return int(datetime.datetime(*args, tzinfo=BERLIN).timestamp() * 1000)


def berlin(ms_: int) -> str:
    return datetime.datetime.fromtimestamp(ms_ / 1000, BERLIN).strftime("%m-%d %H:%M:%S%z")


def ticks(timing: Timing, after: int, n: int) -> list[str]:
    it = timing.ticks_after(after)
    return [berlin(next(it)) for _ in range(n)]


def test_cron_has_seconds_and_keeps_wall_clock_times_across_daylight_saving():
    daily = Timing(cron="0 30 2 * * *", timezone="Europe/Berlin")
    # Spring forward: 02:30 does not exist on 29 March; it runs right after the change.
    assert ticks(daily, at(2026, 3, 28, 12, 0), 3) == ["03-29 03:00:00+0200", "03-30 02:30:00+0200",
                                                       "03-31 02:30:00+0200"]
    # Fall back: 02:30 happens twice on 25 October; a fixed-time job runs once.
    assert ticks(daily, at(2026, 10, 24, 12, 0), 2) == ["10-25 02:30:00+0200", "10-26 02:30:00+0100"]
    # An hourly wildcard runs in both passes of the repeated hour: they are an hour apart.
    half_hourly = Timing(cron="0 */30 * * * *", timezone="Europe/Berlin")
    assert ticks(half_hourly, at(2026, 10, 25, 1, 45), 5) == [
        "10-25 02:00:00+0200", "10-25 02:30:00+0200", "10-25 02:00:00+0100", "10-25 02:30:00+0100",
        "10-25 03:00:00+0100"]
    assert ticks(Timing(cron="*/20 * * * * *"), at(2026, 1, 1, 0, 0, 5), 3) == [
        "01-01 00:00:20+0100", "01-01 00:00:40+0100", "01-01 00:01:00+0100"]
    assert ticks(Timing(cron="@daily", timezone="Europe/Berlin"), at(2026, 1, 1, 12), 1) == ["01-02 00:00:00+0100"]


def test_bad_timings_are_refused():
    for kw in (dict(cron="x"), dict(cron="* * * * * * *"), dict(cron="* * * * *", timezone="Nowhere/Land"), dict(),
               dict(cron="* * * * *", every_ms=1000), dict(cron="0" * 249 + " * * * *"),
               dict(cron="* * * * *", timezone="America"), dict(cron="* * * * *", timezone="Europe/" + "x" * 300)):
        with pytest.raises(BadTiming):
            Timing(**kw)
    for cron in ("61 * * * *", "0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 0 30 2 *"):  # out of range, never fires
        with pytest.raises(BadTiming):
            Timing(cron=cron).check()
    Timing(cron="0 0 29 2 *").check()  # every four years is fine


def _walk_every_tick(timing: Timing, due_ms: int, now_ms: int, grace_ms: int, missed: str) -> tuple:
    """What a plan must be, found the slow way: every tick from due_ms to now_ms in order."""
    ticks = []
    for tick in timing.ticks_after(due_ms - 1):
        if tick > now_ms:
            break
        ticks.append(tick)
    cutoff = now_ms - grace_ms
    late, on_time = [t for t in ticks if t <= cutoff], [t for t in ticks if t > cutoff]
    runs, last_missed = on_time[-MAX_RUNS_PER_CLAIM:], (late[-1] if late else None)
    if len(on_time) > MAX_RUNS_PER_CLAIM:
        last_missed = on_time[-MAX_RUNS_PER_CLAIM - 1]
    elif missed == "once" and last_missed is not None and len(runs) < MAX_RUNS_PER_CLAIM:
        runs = [last_missed, *runs]
    return runs, last_missed, timing.next_after(now_ms)


def test_a_plan_is_what_walking_every_tick_gives_across_daylight_saving():
    rng = random.Random(30)
    bases = [at(2026, 3, 29, 1, 30), at(2026, 10, 25, 1, 30), at(2026, 10, 25, 2, 30), at(2026, 6, 1)]
    timings = [Timing(cron=c, timezone=z) for c, z in (
        ("*/7 * * * * *", "Europe/Berlin"), ("0 30 2 * * *", "Europe/Berlin"), ("0 */30 * * * *", "Europe/Berlin"),
        ("*/20 * * * * *", "UTC"), ("15 2 * * *", "Europe/Berlin"), ("* * * * * *", "America/New_York"))]
    timings += [Timing(every_ms=rng.choice([1000, 1500, 60_000]), anchor_ms=bases[0] + rng.randint(-10**6, 0))
                for _ in range(3)]
    for timing in timings:
        for _ in range(40):
            due = timing.next_after(rng.choice(bases) + rng.randint(-4 * 3_600_000, 4 * 3_600_000))
            now = due + rng.choice([0, 1, 999, 5000, 60_000, 400_000, 3 * 3_600_000])
            args = (timing, due, now, rng.choice([0, 1000, 10_000, 3_600_000]), rng.choice(["once", "skip"]))
            p = plan(*args)
            assert (p.runs, p.last_missed_ms, p.next_ms) == _walk_every_tick(*args), args


def test_a_plan_costs_a_bounded_number_of_ticks_and_a_cron_is_parsed_once(monkeypatch):
    """An every-second cron an hour behind with an hour's grace has 3,600 ticks due;
    a claim looks at no more than the 100 it runs and a few more (it used to walk
    them all, 135 ms on the event loop). The expression is parsed once, not per plan."""
    steps, parses = Counter(), Counter()
    for method in ("get_next", "get_prev"):
        real = getattr(croniter, method)
        monkeypatch.setattr(croniter, method, lambda self, *a, _real=real, _m=method, **kw: (
            steps.update([_m]), _real(self, *a, **kw))[1])
    real_expand = croniter._expand.__func__
    monkeypatch.setattr(croniter, "_expand", classmethod(lambda cls, *a, **kw: (
        parses.update(["expand"]), real_expand(cls, *a, **kw))[1]))
    timing = Timing(cron="* * * * * *", timezone="Europe/Berlin")  # seconds: 6 fields
    due = at(2026, 6, 1)
    for missed in ("once", "skip", "once"):
        p = plan(timing, due, due + 3_600_000, 3_600_000, missed)
        assert len(p.runs) == MAX_RUNS_PER_CLAIM and p.last_missed_ms == due + 3_600_000 - 100_000
    assert sum(steps.values()) <= 3 * (MAX_RUNS_PER_CLAIM + 5), steps
    assert parses["expand"] <= 1, parses


def test_plan_runs_late_ticks_within_grace_and_applies_the_missed_policy_beyond():
    t = Timing(every_ms=1000, anchor_ms=500)
    assert plan(t, 1500, 1500, 10_000, "skip") == plan(t, 1500, 1999, 10_000, "once")
    p = plan(t, 1500, 1500, 10_000, "skip")
    assert (p.runs, p.last_missed_ms, p.next_ms) == ([1500], None, 2500)
    p = plan(t, 1500, 5600, 10_000, "skip")  # an outage shorter than the grace loses no tick
    assert (p.runs, p.last_missed_ms, p.next_ms) == ([1500, 2500, 3500, 4500, 5500], None, 6500)
    skip = plan(t, 1500, 25_600, 10_000, "skip")
    assert (skip.runs, skip.last_missed_ms) == (list(range(16_500, 25_501, 1000)), 15_500)
    once = plan(t, 1500, 25_600, 10_000, "once")
    assert (once.runs, once.last_missed_ms) == ([15_500, *range(16_500, 25_501, 1000)], 15_500)
    zero = plan(t, 1500, 25_600, 0, "skip")
    assert (zero.runs, zero.last_missed_ms, zero.next_ms) == ([], 25_500, 26_500)


def test_ticks_keep_to_the_interval_grid_after_a_late_claim():
    t = Timing(every_ms=1000, anchor_ms=0)
    p = plan(t, 3000, 3990, 10_000, "once")
    assert (p.runs, p.next_ms) == ([3000], 4000)
