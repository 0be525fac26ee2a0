"""Recurring schedules through a real concord-server: CRUD, ticks enqueued once and
never early, pause/resume, missed-tick policies, and the calendar arithmetic
(cron with seconds and time zones, daylight saving) on its own."""

from __future__ import annotations

import datetime
import zoneinfo

import grpc
import pytest
from google.protobuf import duration_pb2

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from concord_server.primitives.schedule_times import BadTiming, Timing, plan
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
               dict(cron="* * * * *", every_ms=1000)):
        with pytest.raises(BadTiming):
            Timing(**kw)


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
