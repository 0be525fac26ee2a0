"""Queue requests with bad input get INVALID_ARGUMENT (or the documented code) and
write nothing to Redis."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2, timestamp_pb2

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from support import assert_rejected_and_nothing_written, error_info, prefixed_keys

LEASE = "0123456789abcdef.1"


def d(seconds: int = 0, nanos: int = 0) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=seconds, nanos=nanos)


@pytest.fixture
def stub(validation_server):
    with grpc.insecure_channel(validation_server.target) as ch:
        yield queue_pb2_grpc.QueueServiceStub(ch)


def enqueue(*tasks: pb.NewTask, queue: str = "q") -> pb.EnqueueRequest:
    return pb.EnqueueRequest(queue=queue, tasks=list(tasks))


T = pb.NewTask(type="t")

BAD_REQUESTS = {
    "Enqueue queue empty": ("Enqueue", enqueue(T, queue=""), "queue"),
    "Enqueue queue newline": ("Enqueue", enqueue(T, queue="a\nb"), "queue"),
    "Enqueue queue 257 bytes": ("Enqueue", enqueue(T, queue="q" * 257), "queue"),
    "Enqueue no tasks": ("Enqueue", enqueue(), "tasks"),
    "Enqueue too many tasks": ("Enqueue", enqueue(*[T] * 1001), "tasks"),
    "Enqueue type empty": ("Enqueue", enqueue(pb.NewTask()), "tasks[0].type"),
    "Enqueue type control char": ("Enqueue", enqueue(T, pb.NewTask(type="a\x00")), "tasks[1].type"),
    "Enqueue payload too large": ("Enqueue", enqueue(pb.NewTask(type="t", payload=b"x" * (1024 * 1024 + 1))),
                                  "tasks[0].payload"),
    "Enqueue priority too high": ("Enqueue", enqueue(pb.NewTask(type="t", priority=1001)), "tasks[0].priority"),
    "Enqueue priority too low": ("Enqueue", enqueue(pb.NewTask(type="t", priority=-1001)), "tasks[0].priority"),
    "Enqueue delay negative": ("Enqueue", enqueue(pb.NewTask(type="t", delay=d(-1))), "tasks[0].delay"),
    "Enqueue delay too long": ("Enqueue", enqueue(pb.NewTask(type="t", delay=d(400 * 86400))), "tasks[0].delay"),
    "Enqueue delay and run_at": ("Enqueue", enqueue(pb.NewTask(type="t", delay=d(1),
                                                               run_at=timestamp_pb2.Timestamp(seconds=1))),
                                 "tasks[0].delay"),
    "Enqueue run_at negative": ("Enqueue", enqueue(pb.NewTask(type="t", run_at=timestamp_pb2.Timestamp(seconds=-5))),
                                "tasks[0].run_at"),
    "Enqueue max_attempts too many": ("Enqueue", enqueue(pb.NewTask(type="t", max_attempts=101)),
                                      "tasks[0].max_attempts"),
    "Enqueue dedupe window without key": ("Enqueue", enqueue(pb.NewTask(type="t", dedupe_window=d(5))),
                                          "tasks[0].dedupe_window"),
    "Enqueue dedupe key control char": ("Enqueue", enqueue(pb.NewTask(type="t", dedupe_key="k\n")),
                                        "tasks[0].dedupe_key"),
    "Dequeue no queues": ("Dequeue", pb.DequeueRequest(), "queues"),
    "Dequeue 17 queues": ("Dequeue", pb.DequeueRequest(queues=[f"q{i}" for i in range(17)]), "queues"),
    "Dequeue repeated queue": ("Dequeue", pb.DequeueRequest(queues=["a", "a"]), "queues"),
    "Dequeue bad queue name": ("Dequeue", pb.DequeueRequest(queues=["ok", ""]), "queues"),
    "Dequeue max_tasks too many": ("Dequeue", pb.DequeueRequest(queues=["q"], max_tasks=1001), "max_tasks"),
    "Dequeue lease below 10ms": ("Dequeue", pb.DequeueRequest(queues=["q"], lease_ttl=d(0, 5_000_000)), "lease_ttl"),
    "Dequeue lease above max": ("Dequeue", pb.DequeueRequest(queues=["q"], lease_ttl=d(3601)), "lease_ttl"),
    "Dequeue wait negative": ("Dequeue", pb.DequeueRequest(queues=["q"], wait_timeout=d(-1)), "wait_timeout"),
    "Dequeue wait above max": ("Dequeue", pb.DequeueRequest(queues=["q"], wait_timeout=d(61)), "wait_timeout"),
    "Ack task_id empty": ("Ack", pb.AckRequest(queue="q", lease=LEASE), "task_id"),
    "Ack lease empty": ("Ack", pb.AckRequest(queue="q", task_id="1"), "lease"),
    "Ack lease with a space": ("Ack", pb.AckRequest(queue="q", task_id="1", lease="a b"), "lease"),
    "Nack error too long": ("Nack", pb.NackRequest(queue="q", task_id="1", lease=LEASE, error="e" * 4097), "error"),
    "Nack retry_delay negative": ("Nack", pb.NackRequest(queue="q", task_id="1", lease=LEASE, retry_delay=d(-1)),
                                  "retry_delay"),
    "ExtendLease lease_ttl missing": ("ExtendLease", pb.ExtendLeaseRequest(queue="q", task_id="1", lease=LEASE),
                                      "lease_ttl"),
    "Release queue empty": ("Release", pb.ReleaseRequest(task_id="1", lease=LEASE), "queue"),
    "Stats queue empty": ("Stats", pb.StatsRequest(), "queue"),
    "Peek dead state": ("Peek", pb.PeekRequest(queue="q", state=pb.TASK_STATE_DEAD), "state"),
    "Peek waiting state": ("Peek", pb.PeekRequest(queue="q", state=pb.TASK_STATE_WAITING), "state"),
    "Peek succeeded state": ("Peek", pb.PeekRequest(queue="q", state=pb.TASK_STATE_SUCCEEDED), "state"),
    "Peek limit too large": ("Peek", pb.PeekRequest(queue="q", limit=1001), "limit"),
    "Cancel task_id empty": ("Cancel", pb.CancelRequest(queue="q"), "task_id"),
    "Purge queue empty": ("Purge", pb.PurgeRequest(), "queue"),
    "ListDead limit too large": ("ListDead", pb.ListDeadRequest(queue="q", limit=1001), "limit"),
    "RetryDead bad id": ("RetryDead", pb.RetryDeadRequest(queue="q", task_ids=["a\x01"]), "task_ids"),
    "Ack result too large": ("Ack", pb.AckRequest(queue="q", task_id="1", lease=LEASE, result=b"r" * (1024 * 1024 + 1)),
                             "result"),
    "Ack result_type control char": ("Ack", pb.AckRequest(queue="q", task_id="1", lease=LEASE, result_type="a\n"),
                                     "result_type"),
    "GetTask queue empty": ("GetTask", pb.GetTaskRequest(task_id="1"), "queue"),
    "GetTask task_id empty": ("GetTask", pb.GetTaskRequest(queue="q"), "task_id"),
    "WaitTask wait negative": ("WaitTask", pb.WaitTaskRequest(queue="q", task_id="1", wait_timeout=d(-1)),
                               "wait_timeout"),
    "WaitTask wait above max": ("WaitTask", pb.WaitTaskRequest(queue="q", task_id="1", wait_timeout=d(61)),
                                "wait_timeout"),
    "ReportProgress nothing": ("ReportProgress", pb.ReportProgressRequest(queue="q", task_id="1", lease=LEASE),
                               "value"),
    "ReportProgress NaN": ("ReportProgress", pb.ReportProgressRequest(queue="q", task_id="1", lease=LEASE,
                                                                      value=float("nan")), "value"),
    "ReportProgress bad JSON": ("ReportProgress", pb.ReportProgressRequest(queue="q", task_id="1", lease=LEASE,
                                                                           json="{rows"), "json"),
    "ReportProgress JSON too long": ("ReportProgress", pb.ReportProgressRequest(
        queue="q", task_id="1", lease=LEASE, json='"' + "x" * 4100 + '"'), "json"),
    "ReportProgress lease below 10ms": ("ReportProgress", pb.ReportProgressRequest(
        queue="q", task_id="1", lease=LEASE, value=1, lease_ttl=d(0, 1_000_000)), "lease_ttl"),
    "Enqueue retry attempts too many": ("Enqueue", enqueue(pb.NewTask(type="t", retry=pb.RetryPolicy(max_attempts=101))),
                                        "tasks[0].retry.max_attempts"),
    "Enqueue both max_attempts": ("Enqueue", enqueue(pb.NewTask(type="t", max_attempts=2,
                                                                retry=pb.RetryPolicy(max_attempts=3))),
                                  "tasks[0].max_attempts"),
    "Enqueue retry backoff unknown": ("Enqueue", enqueue(pb.NewTask(type="t", retry=pb.RetryPolicy(backoff=7))),
                                      "tasks[0].retry.backoff"),
    "Enqueue retry delay negative": ("Enqueue", enqueue(pb.NewTask(type="t", retry=pb.RetryPolicy(
        initial_delay=d(-1)))), "tasks[0].retry.initial_delay"),
    "SetQueuePolicy retry cap too long": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(retry=pb.RetryPolicy(max_delay=d(400 * 86400)))), "policy.retry.max_delay"),
    "SetQueuePolicy queue empty": ("SetQueuePolicy", pb.SetQueuePolicyRequest(), "queue"),
    "SetQueuePolicy count too large": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(succeeded=pb.Retention(max_count=1_000_001))), "policy.succeeded.max_count"),
    "SetQueuePolicy age negative": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(dead=pb.Retention(max_age=d(-1)))), "policy.dead.max_age"),
    "SearchTasks queue empty": ("SearchTasks", pb.SearchTasksRequest(), "queue"),
    "SearchTasks page too large": ("SearchTasks", pb.SearchTasksRequest(queue="q", page_size=101), "page_size"),
    "SearchTasks page token not issued": ("SearchTasks", pb.SearchTasksRequest(queue="q", page_token="6:1:x"),
                                          "page_token"),
    "SearchTasks page token id not hex": ("SearchTasks", pb.SearchTasksRequest(
        queue="q", page_token="1:17:00000000000g"), "page_token"),
    "SearchTasks type and prefix": ("SearchTasks", pb.SearchTasksRequest(queue="q", type="a", type_prefix="a"),
                                    "type_prefix"),
    "SearchTasks type control char": ("SearchTasks", pb.SearchTasksRequest(queue="q", type="a\x00"), "type"),
    "SearchTasks task id with a space": ("SearchTasks", pb.SearchTasksRequest(queue="q", task_id="a b"), "task_id"),
    "SearchTasks unknown state": ("SearchTasks", pb.SearchTasksRequest(queue="q", states=[1, 99]), "states"),
    "SearchTasks error text 257 bytes": ("SearchTasks", pb.SearchTasksRequest(queue="q", error_contains="e" * 257),
                                         "error_contains"),
    "SearchTasks payload 257 bytes": ("SearchTasks", pb.SearchTasksRequest(queue="q", payload_contains=b"p" * 257),
                                      "payload_contains"),
}


# Input that once answered INTERNAL (issue 30, item 7) or cost the server's event loop
# seconds (item 3): each is INVALID_ARGUMENT naming its field, and writes nothing.
EVERY_SECOND_HUGE = (",".join(str(i % 60) for i in range(200_000)))[:566_660] + " * * * * *"  # 566,669 chars
DEEP_JSON = "[" * 2000 + "]" * 2000


def schedule(cron: str = "", time_zone: str = "", **kw) -> pb.ScheduleSpec:
    return pb.ScheduleSpec(cron=cron, time_zone=time_zone, type="t", **kw) if cron else pb.ScheduleSpec(type="t", **kw)


BAD_REQUESTS.update({
    "CreateSchedule cron that never fires": ("CreateSchedule", pb.CreateScheduleRequest(
        queue="q", name="s", spec=schedule("0 0 30 2 *")), "spec.cron"),
    "CreateSchedule cron that never fires, seconds": ("CreateSchedule", pb.CreateScheduleRequest(
        queue="q", name="s", spec=schedule("0 0 0 31 4,6,9,11 *")), "spec.cron"),
    "UpdateSchedule cron that never fires": ("UpdateSchedule", pb.UpdateScheduleRequest(
        queue="q", name="s", spec=schedule("0 0 30 2 *")), "spec.cron"),
    "CreateSchedule cron of 566,669 chars": ("CreateSchedule", pb.CreateScheduleRequest(
        queue="q", name="s", spec=schedule(EVERY_SECOND_HUGE)), "spec.cron"),
    "CreateSchedule cron of 257 bytes": ("CreateSchedule", pb.CreateScheduleRequest(
        queue="q", name="s", spec=schedule("0" * 249 + " * * * *")), "spec.cron"),
    "CreateSchedule time zone that is a directory": ("CreateSchedule", pb.CreateScheduleRequest(
        queue="q", name="s", spec=schedule("* * * * *", "America")), "spec.time_zone"),
    "CreateSchedule time zone too long": ("CreateSchedule", pb.CreateScheduleRequest(
        queue="q", name="s", spec=schedule("* * * * *", "Europe/" + "x" * 300)), "spec.time_zone"),
    "CreateSchedule start_at nanos out of range": ("CreateSchedule", pb.CreateScheduleRequest(
        queue="q", name="s", spec=schedule(every=d(5), start_at=timestamp_pb2.Timestamp(
            seconds=1_800_000_000, nanos=1_000_000_000))), "spec.start_at"),
    "Enqueue run_at nanos out of range": ("Enqueue", enqueue(pb.NewTask(type="t", run_at=timestamp_pb2.Timestamp(
        seconds=1_800_000_000, nanos=2_000_000_000))), "tasks[0].run_at"),
    "Enqueue run_at seconds absurd": ("Enqueue", enqueue(pb.NewTask(type="t", run_at=timestamp_pb2.Timestamp(
        seconds=2**62))), "tasks[0].run_at"),
    "ReportProgress JSON nested 2,000 deep": ("ReportProgress", pb.ReportProgressRequest(
        queue="q", task_id="1", lease=LEASE, json=DEEP_JSON), "json"),
    "ReportProgress JSON nested 33 deep": ("ReportProgress", pb.ReportProgressRequest(
        queue="q", task_id="1", lease=LEASE, json='{"a":' * 33 + "1" + "}" * 33), "json"),
})


def rate(limit: int = 10, period: duration_pb2.Duration | None = None, burst: int = 0) -> pb.LeaseRate:
    return pb.LeaseRate(limit=limit, period=d(1) if period is None else period, burst=burst)


def rules(**kw) -> pb.SetGroupRulesRequest:
    return pb.SetGroupRulesRequest(queue="q", group="g", rules=pb.GroupRules(**kw))


# Flow control (issue 32): zero or negative rates, huge bursts, bad names.
BAD_REQUESTS.update({
    "Enqueue group with a newline": ("Enqueue", enqueue(pb.NewTask(type="t", group="a\nb")), "tasks[0].group"),
    "Enqueue group 257 bytes": ("Enqueue", enqueue(pb.NewTask(type="t", group="g" * 257)), "tasks[0].group"),
    "SetQueuePolicy max_leased 0": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(max_leased=0)), "policy.max_leased"),
    "SetQueuePolicy rate of 0": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(rate=rate(0))), "policy.rate.limit"),
    "SetQueuePolicy rate period 0": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(rate=rate(period=d(0)))), "policy.rate.period"),
    "SetQueuePolicy rate period negative": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(rate=rate(period=d(-1)))), "policy.rate.period"),
    "SetQueuePolicy rate period over a day": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(rate=rate(period=d(86401)))), "policy.rate.period"),
    "SetQueuePolicy huge burst": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(group_rate=rate(burst=2**31))), "policy.group_rate.burst"),
    "SetQueuePolicy group cap too large": ("SetQueuePolicy", pb.SetQueuePolicyRequest(
        queue="q", policy=pb.QueuePolicy(group_max_leased=1_000_001)), "policy.group_max_leased"),
    "SetGroupRules no group": ("SetGroupRules", pb.SetGroupRulesRequest(queue="q"), "group"),
    "SetGroupRules weight 0": ("SetGroupRules", rules(weight=0), "rules.weight"),
    "SetGroupRules weight 1001": ("SetGroupRules", rules(weight=1001), "rules.weight"),
    "SetGroupRules rate of 0": ("SetGroupRules", rules(rate=rate(0)), "rules.rate.limit"),
    "SetGroupRules rate over a million": ("SetGroupRules", rules(rate=rate(1_000_001)), "rules.rate.limit"),
    "GetGroup no group": ("GetGroup", pb.GetGroupRequest(queue="q"), "group"),
    "ListGroups page of 1001": ("ListGroups", pb.ListGroupsRequest(queue="q", page_size=1001), "page_size"),
    "PauseQueue group with a tab": ("PauseQueue", pb.PauseQueueRequest(queue="q", group="a\tb"), "group"),
})


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=str)
def test_bad_input_is_invalid_argument_and_writes_nothing(stub, redis_sync, case):
    method, request, field = BAD_REQUESTS[case]
    assert_rejected_and_nothing_written(lambda: getattr(stub, method)(request, timeout=10), redis_sync, field)


def test_a_bad_task_anywhere_in_a_batch_adds_none_of_it(stub, redis_sync):
    before = prefixed_keys(redis_sync)
    with pytest.raises(grpc.RpcError) as err:
        stub.Enqueue(enqueue(T, T, pb.NewTask(type="t", priority=5000), queue="batch"), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert prefixed_keys(redis_sync) <= before
    assert stub.Stats(pb.StatsRequest(queue="batch"), timeout=10).ready == 0


@pytest.mark.parametrize("method", ["Ack", "Nack", "ExtendLease", "Release"])
def test_unknown_task_or_lease_is_task_lease_not_held(stub, method):
    request = getattr(pb, f"{method}Request")(queue="q", task_id="000000000001", lease=LEASE)
    if method == "ExtendLease":
        request.lease_ttl.CopyFrom(d(5))
    with pytest.raises(grpc.RpcError) as err:
        getattr(stub, method)(request, timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    info = error_info(err.value)
    assert info.reason == "TASK_LEASE_NOT_HELD" and info.metadata["task_id"] == "000000000001"


@pytest.mark.parametrize("method", ["GetTask", "WaitTask"])
def test_lookup_of_an_unknown_task_is_task_not_found(stub, method):
    request = getattr(pb, f"{method}Request")(queue="no-such-queue", task_id="ffffffffffff")
    with pytest.raises(grpc.RpcError) as err:
        getattr(stub, method)(request, timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and error_info(err.value).reason == "TASK_NOT_FOUND"


def test_progress_of_an_unknown_task_is_task_lease_not_held(stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.ReportProgress(pb.ReportProgressRequest(queue="q", task_id="1", lease=LEASE, value=0.5), timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(err.value).reason == "TASK_LEASE_NOT_HELD"


def test_cancel_of_an_unknown_task_is_not_found(stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.Cancel(pb.CancelRequest(queue="q", task_id="ffffffffffff"), timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and error_info(err.value).reason == "TASK_NOT_FOUND"


def test_consume_must_start_with_start(stub, redis_sync):
    before = prefixed_keys(redis_sync)
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Consume(iter([pb.ConsumeRequest(credit=5)]), timeout=10))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "start" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Consume(iter([pb.ConsumeRequest(start=pb.ConsumeStart(queues=[]))]), timeout=10))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_info(err.value).metadata["field"] == "queues"
    assert prefixed_keys(redis_sync) <= before


def test_requests_that_do_not_parse_are_invalid_argument(validation_server):
    with grpc.insecure_channel(validation_server.target) as ch:
        raw = ch.unary_unary("/concord.queue.v1.QueueService/Enqueue", request_serializer=lambda b: b,
                             response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as err:
            raw(b"\x0a\x02\xff\xfe", timeout=10)  # queue: bytes that are not UTF-8
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_names_payloads_and_limits_at_the_edge_work(stub):
    for queue in ("q" * 256, "é" * 128, "{orders}:42", "名前📬"):
        resp = stub.Enqueue(enqueue(pb.NewTask(type="t" * 256, payload=b"\x00" * (1024 * 1024), priority=1000,
                                               max_attempts=100), queue=queue), timeout=10)
        (task,) = stub.Dequeue(pb.DequeueRequest(queues=[queue]), timeout=10).tasks
        assert task.task_id == resp.results[0].task_id and len(task.payload) == 1024 * 1024
        stub.Ack(pb.AckRequest(queue=queue, task_id=task.task_id, lease=task.lease), timeout=10)


def test_an_update_to_a_cron_that_never_fires_leaves_the_schedule_as_it_was(stub, redis_sync):
    before = stub.CreateSchedule(pb.CreateScheduleRequest(
        queue="sched-update", name="s", spec=schedule("0 0 1 1 *")), timeout=10).schedule
    keys = prefixed_keys(redis_sync)
    try:
        for cron in ("0 0 30 2 *", "0 0 31 4 *", "0 0 * * * * *", "0" * 300 + " * * * *"):
            with pytest.raises(grpc.RpcError) as err:
                stub.UpdateSchedule(pb.UpdateScheduleRequest(queue="sched-update", name="s", spec=schedule(cron)),
                                    timeout=10)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
            assert (error_info(err.value).reason, error_info(err.value).metadata["field"]) == ("INVALID_ARGUMENT",
                                                                                            "spec.cron")
        after = stub.GetSchedule(pb.GetScheduleRequest(queue="sched-update", name="s"), timeout=10).schedule
        assert (after.version, after.spec.cron, after.next_run_at) == (before.version, "0 0 1 1 *", before.next_run_at)
        assert prefixed_keys(redis_sync) == keys
    finally:
        stub.DeleteSchedule(pb.DeleteScheduleRequest(queue="sched-update", name="s"), timeout=10)


def test_progress_json_within_the_bounds_is_taken_up_to_the_lease_check(stub):
    """32 levels and brackets inside strings pass validation (the task is unknown, so
    the answer is the lease check's, after validation)."""
    for doc in ('{"a":' * 32 + "1" + "}" * 32, '{"s": "[[[[{{{{' + "[" * 100 + '"}', r'[1, "\\", "\\\"]"]'):
        with pytest.raises(grpc.RpcError) as err:
            stub.ReportProgress(pb.ReportProgressRequest(queue="q", task_id="1", lease=LEASE, json=doc), timeout=10)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, (doc, err.value.details())
