"""Item 10, authorization per service only: a read-write token (the default role) must
not ForceRelease another owner's lock (PERMISSION_DENIED, the lock still held); a
read-only token must not write (Acquire, Enqueue); names with U+202E (right-to-left
override), U+200D (zero-width joiner) or U+FEFF (byte-order mark) are refused
INVALID_ARGUMENT with an ErrorInfo, as lock, queue and chat names. Repeated for the
attack's duration; every answer must be the promised one every time."""

from __future__ import annotations

import grpc
from google.protobuf import duration_pb2

from concord.chat.v1 import chat_pb2, chat_pb2_grpc
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from concord.queue.v1 import queue_pb2, queue_pb2_grpc
from support import error_info

from .harness import ADMIN_TOKEN, ATTACKER, ATTACKER_ADMIN, bearer

READER = "attacker-read-only-0123456789"
TOKENS = ADMIN_TOKEN + f"""
[[tokens]]
token = "{READER}"
tenant = "attacker"
role = "read-only"
"""
HIDDEN = {"U+202E": "\u202e", "U+200D": "\u200d", "U+FEFF": "\ufeff"}


def _expect(ctx, what: str, call, want: grpc.StatusCode, wrong: dict) -> None:
    try:
        call()
        ctx.record("OK")
        got = grpc.StatusCode.OK
    except grpc.RpcError as exc:
        ctx.record(exc.code())
        got = exc.code()
        if got == want and want != grpc.StatusCode.OK:
            info = error_info(exc)
            if info.domain != "concord" or not info.reason:
                wrong[what] = f"{got.name} without an ErrorInfo reason"
                return
    if got != want:
        wrong[what] = f"{got.name} (wanted {want.name})"


def run(ctx) -> None:
    ttl = duration_pb2.Duration(seconds=600)
    wrong: dict[str, str] = {}
    with grpc.insecure_channel(ctx.server.target) as channel:
        locks = lock_pb2_grpc.LockServiceStub(channel)
        queues = queue_pb2_grpc.QueueServiceStub(channel)
        chats = chat_pb2_grpc.ChatServiceStub(channel)
        held = locks.Acquire(lock_pb2.AcquireRequest(name="theirs", ttl=ttl, owner="someone-else"),
                             metadata=bearer(ATTACKER_ADMIN), timeout=30)
        assert held.acquired
        cases = [
            ("read-write ForceRelease", lambda: locks.ForceRelease(lock_pb2.ForceReleaseRequest(name="theirs"),
                                                                  metadata=bearer(ATTACKER), timeout=30),
             grpc.StatusCode.PERMISSION_DENIED),
            ("read-only Acquire", lambda: locks.Acquire(lock_pb2.AcquireRequest(name="ro-lock", ttl=ttl),
                                                       metadata=bearer(READER), timeout=30),
             grpc.StatusCode.PERMISSION_DENIED),
            ("read-only Enqueue", lambda: queues.Enqueue(queue_pb2.EnqueueRequest(queue="ro-q", tasks=[
                queue_pb2.NewTask(type="t")]), metadata=bearer(READER), timeout=30), grpc.StatusCode.PERMISSION_DENIED),
            ("read-only Describe", lambda: locks.Describe(lock_pb2.DescribeRequest(name="theirs"),
                                                         metadata=bearer(READER), timeout=30), grpc.StatusCode.OK),
        ]
        for label, char in HIDDEN.items():
            name = f"pay{char}lap"
            cases += [
                (f"lock name with {label}", lambda n=name: locks.Acquire(lock_pb2.AcquireRequest(name=n, ttl=ttl),
                                                                        metadata=bearer(ATTACKER), timeout=30),
                 grpc.StatusCode.INVALID_ARGUMENT),
                (f"queue name with {label}", lambda n=name: queues.Enqueue(queue_pb2.EnqueueRequest(queue=n, tasks=[
                    queue_pb2.NewTask(type="t")]), metadata=bearer(ATTACKER), timeout=30),
                 grpc.StatusCode.INVALID_ARGUMENT),
                (f"chat sender with {label}", lambda n=name: chats.CreateChat(chat_pb2.CreateChatRequest(
                    sender=n, recipients=["b"], message="hi"), metadata=bearer(ATTACKER), timeout=30),
                 grpc.StatusCode.INVALID_ARGUMENT),
            ]
        ctx.baseline()
        rounds = 0
        with ctx.attacking():
            for _ in ctx.until():
                rounds += 1
                for what, call, want in cases:
                    _expect(ctx, what, call, want, wrong)
        still = locks.Describe(lock_pb2.DescribeRequest(name="theirs"), metadata=bearer(ATTACKER_ADMIN), timeout=30)
    ctx.figures.update(rounds=rounds, wrong=wrong, lock_still_held=still.held and still.owner == "someone-else")
    if not (still.held and still.owner == "someone-else"):
        wrong["the lock a read-write token tried to force-release"] = f"held={still.held} owner={still.owner!r}"
    assert not wrong, f"answers not as promised: {wrong}"
