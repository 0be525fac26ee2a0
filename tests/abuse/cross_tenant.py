"""Item 9, one tenant disturbing or seeing another: the attacker touches 1,000 queues
(the metrics keep depths for the last 1,000 queues served) and must not evict the
victim's queue-depth series; with the attacker's queues in Redis, the victim's first
ListQueues page must hold the victim's queue (the issue: 3,232 empty pages first); a
Download of a missing file must not show an internal Redis key; 1,000 chat
subscribers cancelled at once (300 in the short form) must log no ERROR (streams a
per-tenant or per-connection stream limit refuses are the server's right: only the
ones that opened are cancelled)."""

from __future__ import annotations

import asyncio
import re

import grpc

from concord.chat.v1 import chat_pb2, chat_pb2_grpc
from concord.files.v1 import files_pb2, files_pb2_grpc
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from support import wait_until

from .harness import ATTACKER, KEY_PREFIX, VICTIM, bearer

VICTIM_SERIES = re.compile(r'concord_queue_tasks\{[^}]*tenant="victim"[^}]*queue="vq"|'
                           r'concord_queue_tasks\{[^}]*queue="vq"[^}]*tenant="victim"')
MISSING_FILE = "424242:victim-files"  # well formed (n:group), never uploaded
SUBSCRIBE_OPEN = re.compile(r'concord_streams_open\{[^}]*method="Subscribe"[^}]*\} (\S+)')


def _victim_series(ctx) -> bool:
    return bool(VICTIM_SERIES.search(ctx.server.metrics()))


def _subscribers_open(ctx) -> float:
    return sum(float(v) for v in SUBSCRIBE_OPEN.findall(ctx.server.metrics()))


PER_CHANNEL = 100  # streams per connection: a server's per-connection stream cap would queue the rest


async def _subscribe_and_cancel(ctx, users: list[str], chat_ids: list[str]) -> int:
    """Opens one Subscribe per user (PER_CHANNEL to a connection) and waits for each
    stream's first answer; then, while messages are being sent to their chats (so the
    server is writing to the streams), ends them all: those of every other connection
    cancelled one by one, the rest by their connection closing under them (a client
    process going away)."""
    groups = [users[i:i + PER_CHANNEL] for i in range(0, len(users), PER_CHANNEL)]
    channels = [grpc.aio.insecure_channel(ctx.server.target, options=[("abuse.channel", i)])
                for i in range(len(groups) + 1)]
    sender_channel = channels[-1]
    try:
        streams, to_cancel, to_close = [], [], []
        for g, (group, channel) in enumerate(zip(groups, channels)):
            stub = chat_pb2_grpc.ChatServiceStub(channel)
            mine = [stub.Subscribe(chat_pb2.SubscribeRequest(recipient=u), metadata=bearer(ATTACKER)) for u in group]
            streams += mine
            if g % 2 == 0:
                to_cancel += mine
            else:
                to_close.append(channel)

        async def first(stream) -> bool:
            try:
                await asyncio.wait_for(stream.read(), 30)
                return True
            except (grpc.RpcError, asyncio.TimeoutError) as exc:
                ctx.record(exc.code() if isinstance(exc, grpc.RpcError) else "DEADLINE_EXCEEDED")
                return False

        live = sum(await asyncio.gather(*(first(s) for s in streams)))
        chats = chat_pb2_grpc.ChatServiceStub(sender_channel)
        sent = 0

        async def chatter() -> None:
            nonlocal sent
            while True:
                for chat_id in chat_ids:
                    try:
                        await chats.SendMessage(chat_pb2.SendMessageRequest(chat_id=chat_id, sender="boss",
                                                                            body=f"m{sent}"), metadata=bearer(ATTACKER),
                                                timeout=10)
                        ctx.record("OK")
                    except grpc.RpcError as exc:
                        ctx.record(exc.code())
                    sent += 1

        sender = asyncio.create_task(chatter())
        while sent < 3:
            await asyncio.sleep(0.005)
        for i, s in enumerate(to_cancel):
            s.cancel()
            if i % 50 == 0:
                await asyncio.sleep(0)  # let messages go out between the cancels
        for channel in to_close:
            await channel.close(None)
        mark = sent
        while sent < mark + 3:
            await asyncio.sleep(0.005)
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        return live
    finally:
        for channel in channels:
            await channel.close(None)


def run(ctx) -> None:
    queues_touched = 1_000
    subscribers = ctx.scale.n(300, 1_000)
    problems = []
    with grpc.insecure_channel(ctx.server.target) as channel:
        queues = queue_pb2_grpc.QueueServiceStub(channel)
        chats = chat_pb2_grpc.ChatServiceStub(channel)
        files = files_pb2_grpc.FileServiceStub(channel)
        ctx.call(queues.Enqueue, pb.EnqueueRequest(queue="vq", tasks=[pb.NewTask(type="t")]), token=VICTIM,
                 who="victim", timeout=30)
        wait_until(lambda: _victim_series(ctx), timeout=15, interval=0.2, message="the victim's queue-depth series")
        users = [f"u{i}" for i in range(subscribers)]
        chat_ids = []
        for start in range(0, subscribers, 999):  # chats of at most 1,000 members
            made = ctx.call(chats.CreateChat, chat_pb2.CreateChatRequest(
                sender="boss", recipients=users[start:start + 999], message="hello"), timeout=60)
            chat_ids.append(made.chat_id)
        ctx.baseline()
        with ctx.attacking():
            for i in range(queues_touched):
                ctx.call(queues.Enqueue, pb.EnqueueRequest(queue=f"aq-{i}", tasks=[pb.NewTask(type="t")]), timeout=30)
            live = asyncio.run(_subscribe_and_cancel(ctx, users, chat_ids))
            try:  # a stream: its error comes on reading it
                list(files.Download(files_pb2.DownloadRequest(file_id=MISSING_FILE), metadata=bearer(VICTIM),
                                    timeout=30))
                missing = None
                ctx.record("OK", "victim")
            except grpc.RpcError as exc:
                missing = exc
                ctx.record(exc.code(), "victim")
            first = queues.ListQueues(pb.ListQueuesRequest(), metadata=bearer(VICTIM), timeout=30)
            empty_pages = 0
            page = first
            while not page.names and page.next_page_token and empty_pages < 10_000:
                empty_pages += 1
                page = queues.ListQueues(pb.ListQueuesRequest(page_token=page.next_page_token),
                                         metadata=bearer(VICTIM), timeout=30)
        series_kept = [_victim_series(ctx) for _ in range(2)][-1]  # the second scrape reads fresh depths
        wait_until(lambda: _subscribers_open(ctx) == 0, timeout=30, interval=0.1,
                   message="every cancelled Subscribe stream closed on the server")
    log = ctx.server.log_text()
    errors = [line for line in log.splitlines() if " ERROR " in line or line.startswith("Traceback")]
    detail = missing.details() if isinstance(missing, grpc.RpcError) else repr(missing)
    ctx.figures.update(queues_touched=queues_touched, victim_series_kept=series_kept,
                       victim_first_page=list(first.names)[:5], empty_pages_before_first_result=empty_pages,
                       download_missing=(missing.code().name if isinstance(missing, grpc.RpcError) else None, detail),
                       subscribers=subscribers, subscribers_live=live, error_lines=len(errors))
    if not series_kept:
        problems.append(f"the attacker's {queues_touched} queues evicted the victim's queue-depth series")
    if "vq" not in first.names:
        problems.append(f"the victim's first ListQueues page {list(first.names)[:5]} lacks its queue "
                        f"({empty_pages} empty pages before a result)")
    if not isinstance(missing, grpc.RpcError) or missing.code() != grpc.StatusCode.NOT_FOUND:
        problems.append(f"Download of a missing file: {detail}")
    elif KEY_PREFIX in detail or "{" in detail:
        problems.append(f"Download NOT_FOUND shows an internal key: {detail!r}")
    if errors:
        problems.append(f"{len(errors)} ERROR/Traceback lines in the server log, e.g. {errors[:2]}")
    assert not problems, "; ".join(problems)
