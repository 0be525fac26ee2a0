"""Item 4, a revoked token keeps working on open streams: a token opens a lock Session
(one lock granted) and a chat Subscribe; the token is removed from the token file and
the server reloads it (SIGHUP). Promise: once new calls with the token are refused,
its open streams end too: the Session grants nothing more and ends, the Subscribe
delivers nothing sent after the revocation and ends."""

from __future__ import annotations

import queue
import threading
import time

import grpc
from google.protobuf import duration_pb2

from concord.chat.v1 import chat_pb2, chat_pb2_grpc
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from support import wait_until

from .harness import ATTACKER, bearer, tokens_toml

DOOMED = "attacker-doomed-token-0123456789"
TOKENS = f"""
[[tokens]]
token = "{DOOMED}"
tenant = "attacker"
"""
ENDS_WITHIN = 5.0  # seconds from the refusal of new calls to the end of the open streams


class _Reader:
    """Reads a response stream on a thread: what came (with arrival times), and how it ended."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.got: list[tuple[float, object]] = []
        self.ended: tuple[float, str] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for item in self.stream:
                self.got.append((time.monotonic(), item))
            self.ended = (time.monotonic(), "OK")
        except grpc.RpcError as exc:
            self.ended = (time.monotonic(), exc.code().name)


def run(ctx) -> None:
    ttl = duration_pb2.Duration(seconds=600)
    with grpc.insecure_channel(ctx.server.target) as channel:
        locks = lock_pb2_grpc.LockServiceStub(channel)
        chats = chat_pb2_grpc.ChatServiceStub(channel)
        requests: queue.Queue = queue.Queue()
        session = _Reader(locks.Session(iter(requests.get, None), metadata=bearer(DOOMED)))
        requests.put(lock_pb2.SessionRequest(id=1, acquire=lock_pb2.AcquireRequest(name="s1", ttl=ttl)))
        wait_until(lambda: session.got or session.ended, timeout=15, message="the Session's first grant")
        assert session.got and session.got[0][1].acquire.acquired, f"Session before revocation: {session.got} {session.ended}"
        chat_id = chats.CreateChat(chat_pb2.CreateChatRequest(sender="a", recipients=["d"], message="before"),
                                   metadata=bearer(ATTACKER), timeout=30).chat_id
        feed = _Reader(chats.Subscribe(chat_pb2.SubscribeRequest(recipient="d"), metadata=bearer(DOOMED)))
        wait_until(lambda: any(m.body == "before" for _, r in feed.got for m in r.messages) or feed.ended,
                   timeout=15, message="the Subscribe's first message")
        ctx.baseline()
        with ctx.attacking():
            ctx.server.reload_tokens(tokens_toml())  # DOOMED is gone

            def refused() -> bool:
                reply = ctx.call(locks.Describe, lock_pb2.DescribeRequest(name="s1"), token=DOOMED, timeout=10)
                return isinstance(reply, grpc.RpcError) and reply.code() == grpc.StatusCode.UNAUTHENTICATED

            wait_until(refused, timeout=15, interval=0.05, message="new calls with the revoked token refused")
            revoked_at = time.monotonic()
            requests.put(lock_pb2.SessionRequest(id=2, acquire=lock_pb2.AcquireRequest(name="s2", ttl=ttl)))
            ctx.call(chats.SendMessage, chat_pb2.SendMessageRequest(chat_id=chat_id, sender="a", body="after"),
                     timeout=30)
            for _ in ctx.until():  # the revoked client keeps calling, as a leaked token's holder would
                ctx.call(locks.Describe, lock_pb2.DescribeRequest(name="s1"), token=DOOMED, timeout=10)
            while time.monotonic() < revoked_at + ENDS_WITHIN and not (session.ended and feed.ended):
                time.sleep(0.05)  # the bound itself: how long the streams may take to end
        requests.put(None)
    granted_after = [r.id for t, r in session.got if t >= revoked_at and r.WhichOneof("result") == "acquire"
                     and r.acquire.acquired]
    delivered_after = [m.body for t, r in feed.got for m in r.messages if m.body == "after"]
    for reader in (session, feed):
        if reader.ended:
            ctx.record(reader.ended[1])
    ctx.figures.update(session_end=session.ended and (session.ended[1], round(session.ended[0] - revoked_at, 2)),
                       subscribe_end=feed.ended and (feed.ended[1], round(feed.ended[0] - revoked_at, 2)),
                       granted_after_revocation=granted_after, delivered_after_revocation=delivered_after)
    problems = []
    if granted_after:
        problems.append(f"the revoked token's Session granted {granted_after} after the revocation")
    if delivered_after:
        problems.append("the revoked token's Subscribe delivered a message sent after the revocation")
    if not session.ended or session.ended[0] > revoked_at + ENDS_WITHIN:
        problems.append(f"the revoked token's Session still open {ENDS_WITHIN:g} s after new calls were refused")
    if not feed.ended or feed.ended[0] > revoked_at + ENDS_WITHIN:
        problems.append(f"the revoked token's Subscribe still open {ENDS_WITHIN:g} s after new calls were refused")
    assert not problems, "; ".join(problems)
