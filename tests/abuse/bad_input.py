"""Item 7, bad input answered INTERNAL: an impossible cron (30 February) in
CreateSchedule and UpdateSchedule, a run_at whose nanos are out of range, a progress
JSON nested 2,000 deep. Each must be INVALID_ARGUMENT with an ErrorInfo (domain
concord, a reason), every time, repeated for the attack's duration."""

from __future__ import annotations

import grpc
from google.protobuf import timestamp_pb2

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from support import error_info

from .harness import ATTACKER, bearer

IMPOSSIBLE = "0 0 30 2 *"
DEEP = "[" * 2000 + "]" * 2000


def _cases(queues, lease_task):
    """(what, call) pairs; each call must fail INVALID_ARGUMENT."""
    task_id, lease = lease_task
    return [
        ("CreateSchedule impossible cron", lambda: queues.CreateSchedule(pb.CreateScheduleRequest(
            queue="bad-q", name="feb30", spec=pb.ScheduleSpec(cron=IMPOSSIBLE, type="t")),
            metadata=bearer(ATTACKER), timeout=30)),
        ("UpdateSchedule impossible cron", lambda: queues.UpdateSchedule(pb.UpdateScheduleRequest(
            queue="bad-q", name="valid", spec=pb.ScheduleSpec(cron=IMPOSSIBLE, type="t")),
            metadata=bearer(ATTACKER), timeout=30)),
        ("Enqueue run_at nanos 2e9", lambda: queues.Enqueue(pb.EnqueueRequest(queue="bad-q", tasks=[pb.NewTask(
            type="t", run_at=timestamp_pb2.Timestamp(seconds=2_000_000_000, nanos=2_000_000_000))]),
            metadata=bearer(ATTACKER), timeout=30)),
        ("Enqueue run_at nanos -1", lambda: queues.Enqueue(pb.EnqueueRequest(queue="bad-q", tasks=[pb.NewTask(
            type="t", run_at=timestamp_pb2.Timestamp(seconds=2_000_000_000, nanos=-1))]),
            metadata=bearer(ATTACKER), timeout=30)),
        ("ReportProgress JSON 2,000 deep", lambda: queues.ReportProgress(pb.ReportProgressRequest(
            queue="bad-q", task_id=task_id, lease=lease, json=DEEP), metadata=bearer(ATTACKER), timeout=30)),
    ]


def run(ctx) -> None:
    wrong: dict[str, str] = {}
    rounds = 0
    with grpc.insecure_channel(ctx.server.target) as channel:
        queues = queue_pb2_grpc.QueueServiceStub(channel)
        md = bearer(ATTACKER)
        queues.CreateSchedule(pb.CreateScheduleRequest(queue="bad-q", name="valid", spec=pb.ScheduleSpec(
            cron="0 0 1 1 *", type="t")), metadata=md, timeout=30)
        queues.Enqueue(pb.EnqueueRequest(queue="bad-q", tasks=[pb.NewTask(type="t")]), metadata=md, timeout=30)
        task = queues.Dequeue(pb.DequeueRequest(queues=["bad-q"], max_tasks=1), metadata=md, timeout=30).tasks[0]
        cases = _cases(queues, (task.task_id, task.lease))
        for _, call in cases:  # first-use costs (imports, parsers) before the baseline
            try:
                call()
            except grpc.RpcError:
                pass
        ctx.baseline()
        with ctx.attacking():
            for _ in ctx.until():
                rounds += 1
                for what, call in cases:
                    try:
                        call()
                        ctx.record("OK")
                        wrong[what] = "OK"
                    except grpc.RpcError as exc:
                        ctx.record(exc.code())
                        if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                            wrong[what] = f"{exc.code().name}: {exc.details()}"
                            continue
                        info = error_info(exc)
                        if info.domain != "concord" or not info.reason:
                            wrong[what] = f"ErrorInfo {info.reason!r}/{info.domain!r}"
    ctx.figures.update(rounds=rounds, wrong=wrong)
    assert not wrong, f"not INVALID_ARGUMENT with an ErrorInfo: {wrong}"
