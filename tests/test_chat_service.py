"""ChatService end to end: real concord-server processes and the real Python client."""

from __future__ import annotations

import asyncio
import threading

import grpc
import pytest

import concord
from concord.chat.v1 import chat_pb2 as pb
from concord.chat.v1 import chat_pb2_grpc
from support import ServerProcess, assert_rejected_and_nothing_written, error_info, wait_until


def users(name: str, *who: str) -> list[str]:
    """User names of this test's own (users are global, tests share a server)."""
    return [f"{name}:{w}" for w in who]


def collect(feed: concord.Subscription) -> tuple[list, threading.Thread]:
    got: list = []
    t = threading.Thread(target=lambda: got.extend(feed), daemon=True)
    t.start()
    return got, t


def send_live(feed: concord.Subscription, sender: concord.Client, chat_id: str, user: str, body: str) -> list:
    """Waits for the feed to catch up, sends body, and returns all the feed got once
    the live message is in."""
    got, reader = collect(feed)
    assert feed.wait_caught_up(10)
    sender.chat.send(chat_id, user, body)
    wait_until(lambda: got and got[-1].body == body, message=f"the live message {body!r}")
    feed.close()
    reader.join(5)
    return got


def test_create_send_fetch_and_list(client, name):
    joe, jeff, jenny = users(name, "joe", "jeff", "jenny")
    chat_id = client.chat.create(joe, [jeff, jenny], "Hi all")
    assert client.chat.send(chat_id, jeff, "Hey Joe") == 2
    (summary,) = client.chat.list_chats(jenny)
    assert (summary.chat_id, summary.unread, summary.last_message_id) == (chat_id, 2, 2)
    msgs = list(client.chat.fetch_pending(jenny))
    assert [(m.message_id, m.sender, m.body) for m in msgs] == [(1, joe, "Hi all"), (2, jeff, "Hey Joe")]
    assert list(client.chat.fetch_pending(jenny)) == []
    assert client.chat.list_chats(jenny)[0].unread == 0
    with pytest.raises(concord.NotAMember) as err:
        client.chat.send(chat_id, f"{name}:mallory", "hi")
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED and err.value.reason == "NOT_A_MEMBER"
    with pytest.raises(concord.ChatExists):
        client.chat.create(joe, [jeff], "again", chat_id=chat_id)


def test_a_chat_of_two_is_a_mailbox_and_history_pages(client, name):
    a, b = users(name, "a", "b")
    box = client.chat.create(a, [b], "m1", chat_id=f"{name}:dm")
    for i in range(2, 6):
        client.chat.send(box, a if i % 2 else b, f"m{i}")
    assert [m.body for m in client.chat.history(box, before=4, limit=2)] == ["m3", "m2"]
    assert [m.body for m in client.chat.history(box, after=3)] == ["m4", "m5"]
    with pytest.raises(concord.ChatNotFound):
        client.chat.history(f"{name}:nope")


def test_subscribe_pending_then_live_and_leave_deletes_the_chat(client, redis_sync, name):
    a, b = users(name, "a", "b")
    chat_id = client.chat.create(a, [b], "first")
    got = send_live(client.chat.subscribe(b), client, chat_id, a, "live")
    assert [m.body for m in got] == ["first", "live"]
    assert client.chat.leave(chat_id, a) is False
    assert client.chat.leave(chat_id, b) is True
    assert not redis_sync.keys(f"{{concord:chat:{chat_id}}}*")  # the server under test uses prefix "concord"
    assert client.chat.list_chats(a) == [] and client.chat.list_chats(b) == []


def test_a_message_sent_through_one_replica_reaches_a_subscriber_on_another(redis_server, concord_server, tmp_path,
                                                                          name):
    other = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "replica.log")
    try:
        with concord.Client(concord_server.target) as here, concord.Client(other.target) as there:
            a, b = users(name, "a", "b")
            chat_id = here.chat.create(a, [b], "hello")
            got = send_live(there.chat.subscribe(b), here, chat_id, a, "across replicas")
            assert [m.body for m in got] == ["hello", "across replicas"]
    finally:
        other.stop()


def test_explicit_ack_mode_is_at_least_once_across_reconnects(client, name):
    a, b = users(name, "a", "b")
    chat_id = client.chat.create(a, [b], "m1")
    client.chat.send(chat_id, a, "m2")
    with client.chat.subscribe(b, ack_mode="explicit") as feed:
        it = iter(feed)
        first = next(it)
        client.chat.ack(b, chat_id, first.message_id)
        assert next(it).body == "m2"  # received but never acked: the client "crashes"
    with client.chat.subscribe(b, ack_mode="explicit") as feed:
        assert next(iter(feed)).body == "m2"


async def test_async_chat(aclient, name):
    a, b = users(name, "a", "b")
    chat_id = await aclient.chat.create(a, [b], "hello")
    assert await aclient.chat.join(chat_id, f"{name}:c") == 1
    feed = aclient.chat.subscribe(b)
    got = []

    async def read() -> None:
        async for m in feed:
            got.append(m.body)
            if len(got) == 2:
                return

    reader = asyncio.create_task(read())
    await asyncio.wait_for(feed.wait_caught_up(), 10)
    await aclient.chat.send(chat_id, f"{name}:c", "from c")
    await asyncio.wait_for(reader, 10)
    feed.close()
    assert got == ["hello", "from c"]
    assert [m.body async for m in aclient.chat.fetch_pending(a)] == ["hello", "from c"]


@pytest.fixture
def stub(validation_server):
    with grpc.insecure_channel(validation_server.target) as ch:
        yield chat_pb2_grpc.ChatServiceStub(ch)


BAD_REQUESTS = {
    "CreateChat sender empty": ("CreateChat", pb.CreateChatRequest(recipients=["b"], message="m"), "sender"),
    "CreateChat no recipients": ("CreateChat", pb.CreateChatRequest(sender="a", message="m"), "recipients"),
    "CreateChat recipient control char": ("CreateChat", pb.CreateChatRequest(sender="a", recipients=["b\n"]),
                                          "recipients"),
    "CreateChat message too long": ("CreateChat", pb.CreateChatRequest(sender="a", recipients=["b"],
                                                                        message="x" * 65537), "message"),
    "CreateChat chat_id too long": ("CreateChat", pb.CreateChatRequest(sender="a", recipients=["b"],
                                                                        chat_id="c" * 257), "chat_id"),
    "SendMessage chat_id empty": ("SendMessage", pb.SendMessageRequest(sender="a", body="m"), "chat_id"),
    "SendMessage sender empty": ("SendMessage", pb.SendMessageRequest(chat_id="c", body="m"), "sender"),
    "SendMessage body too long": ("SendMessage", pb.SendMessageRequest(chat_id="c", sender="a", body="é" * 32769),
                                  "body"),
    "FetchPending recipient empty": ("FetchPending", pb.FetchPendingRequest(), "recipient"),
    "Subscribe recipient nul": ("Subscribe", pb.SubscribeRequest(recipient="a\x00"), "recipient"),
    "Subscribe ack_mode unknown": ("Subscribe", pb.SubscribeRequest(recipient="a", ack_mode=7), "ack_mode"),
    "Ack chat_id empty": ("Ack", pb.AckRequest(recipient="a", up_to_id=1), "chat_id"),
    "JoinChat user empty": ("JoinChat", pb.JoinChatRequest(chat_id="c"), "user"),
    "LeaveChat chat_id empty": ("LeaveChat", pb.LeaveChatRequest(user="u"), "chat_id"),
    "ListChats user too long": ("ListChats", pb.ListChatsRequest(user="u" * 257), "user"),
    "GetHistory before and after": ("GetHistory", pb.GetHistoryRequest(chat_id="c", before_id=5, after_id=1),
                                    "before_id"),
    "GetHistory limit too large": ("GetHistory", pb.GetHistoryRequest(chat_id="c", limit=1001), "limit"),
}


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=str)
def test_bad_input_is_invalid_argument_and_writes_nothing(stub, redis_sync, case):
    method, request, field = BAD_REQUESTS[case]
    assert_rejected_and_nothing_written(lambda: getattr(stub, method)(request, timeout=10), redis_sync, field)


def test_too_many_members_is_resource_exhausted(validation_server, stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.CreateChat(pb.CreateChatRequest(sender="a", recipients=[f"u{i}" for i in range(1000)]), timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and error_info(err.value).reason == "CHAT_FULL"
