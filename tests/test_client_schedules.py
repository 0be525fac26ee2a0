"""Queue schedules through the Python client (sync and async) against a real server:
create, update, pause, resume, delete, get and list; the tasks ticks enqueue carry
their schedule; typed errors; and one task per tick with several servers ticking."""

from __future__ import annotations

import datetime
import zoneinfo
from collections.abc import Iterator

import pytest

import concord
import concord.queues
from support import ServerProcess, wait_until

UTC = datetime.timezone.utc


def aware(t: datetime.datetime | None) -> bool:
    return t is not None and t.tzinfo is not None and t.utcoffset() == datetime.timedelta(0)


def test_an_interval_schedule_enqueues_tasks_that_name_it(client, name):
    q = client.queue(name)
    s = q.schedule("beat", every=1, payload={"n": 1}, priority=7, max_attempts=2, missed="skip", grace=5)
    assert (s.queue, s.name, s.cron, s.every, s.tz, s.type) == (name, "beat", None, 1.0, None, "beat")
    assert (s.payload, s.json(), s.priority, s.max_attempts, s.missed, s.grace) == (b'{"n":1}', {"n": 1}, 7, 2,
                                                                                    "skip", 5.0)
    assert (s.paused, s.runs, s.version, s.last_run_at, s.last_task_id, s.last_missed_at) == (False, 0, 1, None, "",
                                                                                             None)
    assert all(map(aware, (s.next_run_at, s.start_at, s.created_at, s.updated_at)))
    assert s.next_run_at == s.start_at + datetime.timedelta(seconds=1) and s.when == "every 1s"

    [leased] = q.get(lease_ttl=30, timeout=15)  # the first tick, a second after it was made
    assert (leased.type, leased.json(), leased.priority, leased.max_attempts) == ("beat", {"n": 1}, 7, 2)
    leased.ack()
    task = q.get_task(leased.task_id)
    assert task.schedule == "beat" and aware(task.scheduled_at) and task.scheduled_at >= s.next_run_at
    assert task.enqueued_at >= task.scheduled_at, "a tick ran early"
    assert ((task.scheduled_at - s.start_at) / datetime.timedelta(seconds=1)).is_integer(), "off the interval grid"
    assert q.put("by_hand").info().schedule == "" and q.get_task(q.put("x")).scheduled_at is None

    got = wait_until(lambda: (g := q.get_schedule("beat")).runs >= 1 and g, timeout=15, message="runs counted")
    assert got.last_task_id and got.last_run_at is not None and got.next_run_at > got.last_run_at
    q.delete_schedule("beat")


def test_cron_schedules_keep_their_time_zone_and_payload_encoding_follows_put(client, name):
    q = client.queue(name)
    s = q.schedule("nightly", cron="30 2 * * *", tz="Europe/Berlin", type="build_report", payload="text")
    assert (s.cron, s.tz, s.every, s.start_at, s.type, s.payload) == ("30 2 * * *", "Europe/Berlin", None, None,
                                                                     "build_report", b"text")
    assert s.when == "30 2 * * * (Europe/Berlin)" and s.missed == "once" and s.grace == 10.0
    local = s.next_run_at.astimezone(zoneinfo.ZoneInfo("Europe/Berlin"))
    # 02:30 Berlin time, or 03:00 on the night clocks go forward and skip it
    assert (local.hour, local.minute) in ((2, 30), (3, 0)) and local.second == 0
    assert s.next_run_at > datetime.datetime.now(UTC) - datetime.timedelta(seconds=5)
    assert q.schedule("raw", cron="@daily", payload=b"\x00\xff").payload == b"\x00\xff"
    assert q.schedule("utc", cron="0 0 3 * * *").tz == "UTC"  # 6 fields: seconds first


def test_update_pause_resume_delete_and_list(client, name):
    q = client.queue(name)
    q.schedule("a", every=datetime.timedelta(hours=1), type="t")
    q.schedule("b", cron="0 3 * * *", type="t")
    with pytest.raises(concord.ScheduleExists) as exists:
        q.schedule("a", every=5)
    assert isinstance(exists.value, concord.AlreadyExists) and exists.value.reason == "SCHEDULE_EXISTS"

    listed = q.schedules()
    assert sorted(s.name for s in listed) == ["a", "b"]
    assert [s.next_run_at for s in listed] == sorted(s.next_run_at for s in listed), "soonest first"

    paused = q.pause_schedule("a")
    assert (paused.paused, paused.next_run_at, paused.version) == (True, None, 2)
    assert q.pause_schedule("a").version == 2, "pausing a paused schedule changes nothing"
    assert [s.name for s in q.schedules()] == ["b", "a"], "paused ones last"
    resumed = q.resume_schedule("a")
    assert not resumed.paused and resumed.next_run_at > datetime.datetime.now(UTC)

    updated = q.update_schedule("a", every=60, type="u", payload=[1, 2], paused=True)
    assert (updated.every, updated.type, updated.json(), updated.paused) == (60.0, "u", [1, 2], True)
    kept = q.update_schedule("a", cron="*/5 * * * *", tz="Asia/Tokyo")  # paused as it was; the whole spec replaced
    assert (kept.paused, kept.cron, kept.tz, kept.every, kept.type, kept.payload) == (True, "*/5 * * * *",
                                                                                      "Asia/Tokyo", None, "a", b"")
    assert kept.version > updated.version and kept.updated_at >= kept.created_at

    q.delete_schedule("a")
    assert [s.name for s in q.schedules()] == ["b"]
    for call in (q.get_schedule, q.pause_schedule, q.resume_schedule, q.delete_schedule,
                 lambda n: q.update_schedule(n, every=5)):
        with pytest.raises(concord.ScheduleNotFound) as missing:
            call("a")
        assert isinstance(missing.value, concord.NotFound) and missing.value.reason == "SCHEDULE_NOT_FOUND"
    assert client.queue(f"{name}:none").schedules() == []


def test_schedules_reads_every_page(client, name, monkeypatch):
    monkeypatch.setattr(concord.queues, "SCHEDULES_PAGE", 2)
    q = client.queue(name)
    for i in range(5):
        q.schedule(f"s{i}", every=3600 + i, paused=i == 4)
    assert [s.name for s in q.schedules()] == ["s0", "s1", "s2", "s3", "s4"]


def test_bad_schedules_are_refused(client, name):
    q = client.queue(name)
    for kwargs in ({}, {"cron": "* * * * *", "every": 5}, {"every": 5, "missed": "sometimes"}):
        with pytest.raises(ValueError):
            q.schedule("s", **kwargs)
    for kwargs, field in (({"cron": "61 * * * *"}, "spec.cron"), ({"cron": "* * * * *", "tz": "Mars/Olympus"},
                                                                 "spec.time_zone"),
                          ({"every": 0.5}, "spec.every"), ({"every": 5, "tz": "Europe/Berlin"}, "spec.time_zone"),
                          ({"every": 5, "grace": 7200}, "spec.grace"), ({"every": 5, "priority": 5000},
                                                                       "spec.priority")):
        with pytest.raises(concord.InvalidArgument) as bad:
            q.schedule("s", **kwargs)
        assert bad.value.metadata.get("field") == field, kwargs
    assert q.schedules() == []


async def test_the_async_client_has_the_same(aclient, name):
    q = aclient.queue(name)
    s = await q.schedule("tick", every=1, type="ping", payload={"a": 1})
    assert (s.every, s.type, s.json(), s.paused) == (1.0, "ping", {"a": 1}, False)
    with pytest.raises(concord.ScheduleExists):
        await q.schedule("tick", every=1)
    [leased] = await q.get(lease_ttl=30, timeout=15)
    assert (leased.type, leased.json()) == ("ping", {"a": 1})
    task = await q.wait_task(leased.task_id, 0)
    assert task.schedule == "tick" and aware(task.scheduled_at) and task.enqueued_at >= task.scheduled_at
    await leased.ack()

    paused = await q.pause_schedule("tick")
    assert paused.paused and (await q.get_schedule("tick")).paused
    assert [x.name for x in await q.schedules()] == ["tick"]
    resumed = await q.resume_schedule("tick")
    assert not resumed.paused and resumed.next_run_at is not None
    updated = await q.update_schedule("tick", cron="0 9 * * 1-5", tz="America/New_York", type="ping")
    assert (updated.cron, updated.tz, updated.every) == ("0 9 * * 1-5", "America/New_York", None)
    await q.delete_schedule("tick")
    with pytest.raises(concord.ScheduleNotFound):
        await q.get_schedule("tick")
    assert await q.schedules() == []


@pytest.fixture
def more_servers(redis_server, tmp_path) -> Iterator[list[ServerProcess]]:
    """Two more servers on the concord_server fixture's Redis (and key prefix): three tickers."""
    servers = []
    try:
        for i in range(2):
            servers.append(ServerProcess("--redis-url", redis_server.url, "--log-level", "WARNING").start(
                tmp_path / f"server{i}.log"))
        yield servers
    finally:
        for s in servers:
            assert s.stop() == 0, s.log_text()


def test_three_servers_enqueue_each_tick_once(client, more_servers, name):
    q = client.queue(name)
    s = q.schedule("beat", every=1, type="t")
    tasks = wait_until(lambda: (found := q.peek(limit=1000)) and len(found) >= 4 and found, timeout=30,
                       message="four ticks")
    ticks = [q.get_task(t.task_id).scheduled_at for t in tasks]
    assert len(set(ticks)) == len(ticks), "a tick enqueued twice"
    assert all(((t - s.start_at) / datetime.timedelta(seconds=1)).is_integer() for t in ticks)
    q.pause_schedule("beat")
    assert q.get_schedule("beat").runs == len(q.peek(limit=1000))
