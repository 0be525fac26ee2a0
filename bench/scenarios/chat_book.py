"""The multi-recipient messaging of "Redis in Action" (section 6.5.2), written from
the book's algorithm over sync redis-py, for the chat-fetch comparison.

Keys, all plain commands (no server-side logic):

    chat:CHAT   zset  member -> id of the last message that member has seen
    seen:USER   zset  chat -> id of the last message the user has seen there
    msgs:CHAT   zset  JSON {id, ts, sender, message} scored by its id
    ids:CHAT    string, INCR'ed per message

fetch_pending_messages(recipient), as the book writes it, in round trips:

 1. ZRANGE seen:USER 0 -1 WITHSCORES                                    1
 2. one MULTI/EXEC: ZRANGEBYSCORE msgs:CHAT (seen+1) +inf for each chat  1
 3. for each chat that had messages: ZADD chat:CHAT USER last id, then
    ZRANGE chat:CHAT 0 0 WITHSCORES (the lowest seen id of all members),
    each sent on its own                                                  2 per chat
 4. one MULTI/EXEC: ZADD seen:USER CHAT last id for each of those chats,
    and ZREMRANGEBYSCORE msgs:CHAT 0 lowest seen (what all have seen)    1

so 3 + 2 x (chats with pending messages). The book's send_message takes a lock
around INCR + ZADD; put_chat below writes the same keys in one pipeline instead, since
setting up the data is not what is measured.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import redis


def put_chat(conn: redis.Redis, chat_id: str, seen: dict[str, int], messages: Sequence[tuple[str, str]]) -> None:
    """A chat with these members (member -> seen id) and messages (sender, text), ids
    from 1: the keys create_chat + send_message leave, plus the members' positions."""
    pipe = conn.pipeline(True)
    pipe.zadd(f"chat:{chat_id}", seen)
    for member, seen_id in seen.items():
        pipe.zadd(f"seen:{member}", {chat_id: seen_id})
    now = time.time()
    pipe.zadd(f"msgs:{chat_id}", {json.dumps({"id": i, "ts": now, "sender": sender, "message": text}): i
                                  for i, (sender, text) in enumerate(messages, 1)})
    pipe.set(f"ids:{chat_id}", len(messages))
    pipe.execute()


def fetch_pending_messages(conn: redis.Redis, recipient: str) -> list[tuple[str, list[dict]]]:
    """(chat id, messages) for each of the recipient's chats with unseen messages,
    marking them seen and deleting what every member has seen."""
    seen = conn.zrange(f"seen:{recipient}", 0, -1, withscores=True)
    pipe = conn.pipeline(True)
    for chat_id, seen_id in seen:
        pipe.zrangebyscore(f"msgs:{chat_id.decode()}", seen_id + 1, "inf")
    pending = []
    for (chat_id, _), packed in zip(seen, pipe.execute()):
        if not packed:
            continue
        chat = chat_id.decode()
        messages = [json.loads(m) for m in packed]
        last = messages[-1]["id"]
        conn.zadd(f"chat:{chat}", {recipient: last})
        lowest = conn.zrange(f"chat:{chat}", 0, 0, withscores=True)
        pipe.zadd(f"seen:{recipient}", {chat: last})
        if lowest:
            pipe.zremrangebyscore(f"msgs:{chat}", 0, lowest[0][1])
        pending.append((chat, messages))
    pipe.execute()
    return pending
