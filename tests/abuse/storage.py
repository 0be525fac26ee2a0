"""Item 5, no storage bound: the attacker writes 1 MiB task payloads as fast as it can
from several threads (the issue: 600 MiB in 5 s). Promise: past its quota it is
refused RESOURCE_EXHAUSTED (having stored at most its quota and one request more),
while the victim can still write; and purging many queues (10,000 in the full form)
leaves no key of theirs behind (the issue: ~4.5 KB per purged queue, forever)."""

from __future__ import annotations

import threading
from collections import Counter

import grpc

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from .harness import ADMIN_TOKEN, ATTACKER_ADMIN, VICTIM

MIB = 1 << 20
PAYLOAD = b"x" * (MIB - 1024)  # within the default 1 MiB payload limit
PER_CALL = 3  # tasks per Enqueue: ~3 MiB, under the 4 MiB message limit
WRITERS = 3
QUOTA_MIB = 64  # the attacker tenant's storage quota in this run (TOKENS)

# The attacker tenant's storage quota (quotas.py: task payload bytes it may store).
TOKENS = ADMIN_TOKEN + f"""
[tenants.attacker]
storage_bytes = {QUOTA_MIB * MIB}
"""
# What a purge keeps by design: a queue's task counter (one short string), so that no
# task id is ever handed out twice in a queue (lua/queue_remove.lua).
KEPT = (":seq",)


def _flood(ctx, stop: threading.Event, stored: list[int], first_refusal: list[int]) -> None:
    with grpc.insecure_channel(ctx.server.target, options=[("grpc.max_send_message_length", 8 << 20)]) as channel:
        queues = queue_pb2_grpc.QueueServiceStub(channel)
        request = pb.EnqueueRequest(queue="flood", tasks=[pb.NewTask(type="blob", payload=PAYLOAD)] * PER_CALL)
        while not stop.is_set():
            reply = ctx.call(queues.Enqueue, request, timeout=30)
            if isinstance(reply, grpc.RpcError):
                if reply.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and not first_refusal:
                    first_refusal.append(sum(stored))
                if reply.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    stop.wait(0.05)
            else:
                stored.append(PER_CALL * len(PAYLOAD))


def run(ctx) -> None:
    purged = ctx.scale.n(300, 10_000)
    with grpc.insecure_channel(ctx.server.target) as channel:
        queues = queue_pb2_grpc.QueueServiceStub(channel)
        ctx.call(queues.Enqueue, pb.EnqueueRequest(queue="warm", tasks=[pb.NewTask(type="t", payload=b"w")]),
                 timeout=30)
        ctx.call(queues.Purge, pb.PurgeRequest(queue="warm", include_dead=True), token=ATTACKER_ADMIN, timeout=30)
        ctx.baseline()
        stop = threading.Event()
        stored: list[int] = []
        first_refusal: list[int] = []
        with ctx.attacking():
            writers = [threading.Thread(target=_flood, args=(ctx, stop, stored, first_refusal)) for _ in range(WRITERS)]
            for w in writers:
                w.start()
            stop.wait(ctx.scale.attack)
            victim_write = ctx.call(queues.Enqueue, pb.EnqueueRequest(queue="mine", tasks=[
                pb.NewTask(type="t", payload=b"v" * 65536)]), token=VICTIM, who="victim", timeout=30)
            stop.set()
            for w in writers:
                w.join(60)
            purge_failed = Counter()
            for i in range(purged):  # many queues, each with a task, each purged
                ctx.call(queues.Enqueue, pb.EnqueueRequest(queue=f"purgeq-{i}", tasks=[pb.NewTask(type="t")]),
                         timeout=30)
                reply = ctx.call(queues.Purge, pb.PurgeRequest(queue=f"purgeq-{i}", include_dead=True),
                                 token=ATTACKER_ADMIN, timeout=30)
                if isinstance(reply, grpc.RpcError):
                    purge_failed[reply.code().name] += 1
        ctx.call(queues.Purge, pb.PurgeRequest(queue="flood", include_dead=True), token=ATTACKER_ADMIN, timeout=120)
    with ctx.server.redis() as r:
        left = [k for k in r.scan_iter(match="*purgeq-*", count=1000) if not k.endswith(KEPT)]
        left_bytes = sum(r.memory_usage(k) or 0 for k in left[:2000])
    ctx.figures.update(stored_mib=round(sum(stored) / MIB, 1), quota_mib=QUOTA_MIB,
                       refused_after_mib=round(first_refusal[0] / MIB, 1) if first_refusal else None,
                       victim_write="OK" if not isinstance(victim_write, grpc.RpcError) else victim_write.code().name,
                       queues_purged=purged, keys_left=len(left), bytes_left_per_queue=round(left_bytes / purged),
                       sample_keys_left=sorted(left)[:3])
    problems = []
    if not first_refusal:
        problems.append(f"the attacker stored {sum(stored) / MIB:.0f} MiB and was never refused RESOURCE_EXHAUSTED")
    elif sum(stored) > QUOTA_MIB * MIB + WRITERS * PER_CALL * MIB:
        problems.append(f"the attacker stored {sum(stored) / MIB:.0f} MiB past its {QUOTA_MIB} MiB quota")
    if isinstance(victim_write, grpc.RpcError):
        problems.append(f"the victim's write failed {victim_write.code().name}: {victim_write.details()}")
    if purge_failed:
        problems.append(f"Purge by the tenant's admin token failed: {dict(purge_failed)}")
    if left:
        problems.append(f"{len(left)} keys of {purged} purged queues left ({left_bytes / purged:.0f} B per queue), "
                        f"e.g. {sorted(left)[:3]}")
    assert not problems, "; ".join(problems)
