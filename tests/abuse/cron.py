"""Item 3, cron expressions of any size: one CreateSchedule with a 566,669-character
every-second cron (a seconds field listing 0-59 over and over), then twenty 62 KB
every-second crons in the same tenant, all kept for the attack. A server may refuse
them (INVALID_ARGUMENT) or accept them; either way their cost must not reach the
victim (evaluated off the event loop, bounded, precompiled)."""

from __future__ import annotations

import time

import grpc

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

OPTIONS = [("grpc.max_send_message_length", 8 << 20), ("grpc.max_receive_message_length", 8 << 20)]


def every_second_cron(length: int) -> str:
    """A 6-field (seconds first) cron of ``length`` characters that fires every second."""
    rest = " * * * * *"
    seconds = []
    size = 0
    i = 0
    while size < length - len(rest):
        part = str(i % 60)
        seconds.append(part)
        size += len(part) + 1
        i += 1
    text = ",".join(seconds)[: length - len(rest)].rstrip(",")
    return text + rest


def run(ctx) -> None:
    huge = every_second_cron(566_669)
    big = every_second_cron(62 * 1024)
    with grpc.insecure_channel(ctx.server.target, options=OPTIONS) as channel:
        queues = queue_pb2_grpc.QueueServiceStub(channel)
        warm = pb.ScheduleSpec(cron="* * * * * *", type="t")  # a schedule's first-use costs, before the baseline
        ctx.call(queues.CreateSchedule, pb.CreateScheduleRequest(queue="cron-q", name="warm", spec=warm), timeout=30)
        ctx.call(queues.DeleteSchedule, pb.DeleteScheduleRequest(queue="cron-q", name="warm"), timeout=30)
        ctx.baseline()
        created = []
        with ctx.attacking():
            answers = {}
            give_up = time.monotonic() + ctx.scale.attack + 20  # a stalled server fails the run, not its timeout
            for name, cron in [("huge", huge), *((f"big-{i}", big) for i in range(20))]:
                if time.monotonic() > give_up:
                    answers[name] = "not sent: the server was too slow"
                    continue
                reply = ctx.call(queues.CreateSchedule, pb.CreateScheduleRequest(
                    queue="cron-q", name=name, spec=pb.ScheduleSpec(cron=cron, type="t")), timeout=10)
                answers[name] = "OK" if not isinstance(reply, grpc.RpcError) else reply.code().name
                if answers[name] == "OK":
                    created.append(name)
            for _ in ctx.until():  # the schedules exist for the attack's duration
                ctx.call(queues.Stats, pb.StatsRequest(queue="cron-q"), timeout=10)
        for name in created:
            ctx.call(queues.DeleteSchedule, pb.DeleteScheduleRequest(queue="cron-q", name=name), timeout=10)
    ctx.figures.update(huge_cron_chars=len(huge), big_cron_chars=len(big), huge_answer=answers["huge"],
                       big_answers=sorted({a for n, a in answers.items() if n != "huge"}), schedules_kept=len(created))
