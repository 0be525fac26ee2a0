"""Item 8, a call that leases and then cannot send: ten ~1 MiB tasks, then Dequeue
(max_tasks=10, the README's get(max_tasks=10)), Peek and chat GetHistory whose
replies would be ~10 MiB against a 4 MiB message limit, over a default client
channel, repeated for the attack. Promise: a reply that would be too large is refused
or cut to what fits *before* anything is leased; afterwards every leased task is one
the attacker received (the issue: RESOURCE_EXHAUSTED after leasing, the tasks leased
to nobody until their lease ran out, an attempt lost)."""

from __future__ import annotations

import grpc
from google.protobuf import duration_pb2

from concord.chat.v1 import chat_pb2, chat_pb2_grpc
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from .harness import ATTACKER, bearer

PAYLOAD = b"p" * ((1 << 20) - 1024)
TASKS = 10
BODY = "m" * (60 * 1024)


def run(ctx) -> None:
    md = bearer(ATTACKER)
    with grpc.insecure_channel(ctx.server.target, options=[("grpc.max_send_message_length", 8 << 20)]) as channel:
        queues = queue_pb2_grpc.QueueServiceStub(channel)
        chats = chat_pb2_grpc.ChatServiceStub(channel)
        for i in range(0, TASKS, 3):
            queues.Enqueue(pb.EnqueueRequest(queue="big", tasks=[pb.NewTask(type="blob", payload=PAYLOAD)] * min(
                3, TASKS - i)), metadata=md, timeout=30)
        chat_id = chats.CreateChat(chat_pb2.CreateChatRequest(sender="a", recipients=["b"], message="hi"),
                                   metadata=md, timeout=30).chat_id
        for _ in range(100):
            chats.SendMessage(chat_pb2.SendMessageRequest(chat_id=chat_id, sender="a", body=BODY), metadata=md,
                              timeout=30)
        lease = duration_pb2.Duration(seconds=600)
        ctx.baseline()
        received: set[str] = set()
        answers: dict[str, set] = {"Dequeue": set(), "Peek": set(), "GetHistory": set()}
        with ctx.attacking():
            for _ in ctx.until():
                reply = ctx.call(queues.Dequeue, pb.DequeueRequest(queues=["big"], max_tasks=TASKS, lease_ttl=lease),
                                 timeout=30)
                if isinstance(reply, grpc.RpcError):
                    answers["Dequeue"].add(reply.code().name)
                else:
                    answers["Dequeue"].add(f"OK ({len(reply.tasks)} tasks)")
                    received |= {t.task_id for t in reply.tasks}
                for what, fn, request in [
                        ("Peek", queues.Peek, pb.PeekRequest(queue="big", state=pb.TASK_STATE_LEASED, limit=TASKS)),
                        ("GetHistory", chats.GetHistory, chat_pb2.GetHistoryRequest(chat_id=chat_id, limit=100))]:
                    reply = ctx.call(fn, request, timeout=30)
                    answers[what].add(reply.code().name if isinstance(reply, grpc.RpcError) else
                                      f"OK ({len(getattr(reply, 'tasks', None) or reply.messages)})")
        stats = queues.Stats(pb.StatsRequest(queue="big"), metadata=md, timeout=30)
    ctx.figures.update(answers={k: sorted(v) for k, v in answers.items()}, received=len(received),
                       leased=stats.leased, ready=stats.ready)
    assert stats.leased == len(received), (
        f"{stats.leased} tasks leased but only {len(received)} ever reached the client (answers: {answers})")
