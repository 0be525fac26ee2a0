"""`concord chat`: list, describe, tail."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from ..chat.v1 import chat_pb2
from ..errors import NotAMember, from_rpc_error
from ._common import Base, Command, _table


# GetHistory's before_id that is above every message id: the newest messages first.
_NEWEST = 2**64 - 1


def _message_dict(m: chat_pb2.ChatMessage) -> dict[str, Any]:
    return {"chat_id": m.chat_id, "message_id": m.message_id, "sender": m.sender, "body": m.body,
            "sent_at": m.sent_at.ToJsonString() if m.HasField("sent_at") else ""}


class Commands(Base):
    def chat_list(self, args: argparse.Namespace) -> None:
        self.list_names("chats", "chat", "ListAllChats", chat_pb2.ListAllChatsRequest)

    def latest_messages(self, chat_id: str, limit: int) -> list[chat_pb2.ChatMessage]:
        """The newest ``limit`` kept messages, oldest of them first (ChatNotFound if no such chat)."""
        r = self.call("chat", "GetHistory",
                      chat_pb2.GetHistoryRequest(chat_id=chat_id, before_id=_NEWEST, limit=limit))
        return sorted(r.messages, key=lambda m: m.message_id)

    def chat_describe(self, args: argparse.Namespace) -> None:
        messages = [_message_dict(m) for m in self.latest_messages(args.chat_id, args.limit)]
        d = {"chat_id": args.chat_id, "last_id": messages[-1]["message_id"] if messages else None,
             "messages": messages}
        text = f"chat {args.chat_id!r}, last message id {d['last_id']}; latest messages:\n"
        self.emit(d, text + (_table(messages, ["message_id", "sender", "sent_at", "body"]) if messages else "(none)"))

    def chat_tail(self, args: argparse.Namespace) -> None:
        """Messages sent to one chat from now on, until Ctrl-C (like ``tail -f``): a
        Subscribe as a member in explicit ack mode, so tailing never marks anything
        seen for that member; what the chat held before is not printed."""
        latest = self.latest_messages(args.chat_id, 1)
        after = latest[-1].message_id if latest else 0
        members_chats = self.call("chat", "ListChats", chat_pb2.ListChatsRequest(user=args.user))
        if args.chat_id not in {c.chat_id for c in members_chats.chats}:
            # Subscribe would wait for this user's chats forever without a word.
            raise NotAMember(f"{args.user!r} is not a member of chat {args.chat_id!r} ({NotAMember.reason}); "
                             "--as must name a member", reason=NotAMember.reason)
        for m in self._messages(args.user, ready=lambda: print(
                # On stderr, so --json output stays one message per line.
                f"tailing chat {args.chat_id!r}: messages after {after} (Ctrl-C to stop)", file=sys.stderr,
                flush=True)):
            if m.chat_id == args.chat_id and m.message_id > after:
                after = m.message_id
                d = _message_dict(m)
                self.emit(d, f"{d['message_id']}  {d['sent_at']}  {d['sender']}: {d['body']}")

    def _messages(self, user: str, ready: Callable[[], None]) -> Iterator[chat_pb2.ChatMessage]:
        """The user's messages, unseen ones first; ready() runs once the stream is live."""
        request = chat_pb2.SubscribeRequest(recipient=user, ack_mode=chat_pb2.ACK_MODE_EXPLICIT)
        call = self.client._service("chat").open("Subscribe")(request)
        live = False
        try:
            for response in call:
                yield from response.messages
                if response.caught_up and not live:
                    live = True
                    ready()
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        finally:
            call.cancel()


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    chat = kinds.add_parser("chat", help="chats").add_subparsers(dest="action", required=True)
    command(chat, "list", "chat_list", "every chat's id")
    desc = command(chat, "describe", "chat_describe", "last message id and the latest messages")
    desc.add_argument("chat_id")
    desc.add_argument("--limit", type=int, default=10)
    tail = command(chat, "tail", "chat_tail", "print messages sent from now on, until Ctrl-C")
    tail.add_argument("chat_id")
    tail.add_argument("--as", dest="user", required=True, help="a member to read as (nothing is marked seen)")
