"""The chats page: the tenant's chats with their members, each member's unread count
and the gaps retention made, read through the chat primitive (app.py's, in the
viewer's tenant): the first MAX_CHATS chat ids by name of the tenant's listing index
(ListAllChats'), each read by one bounded script that writes nothing
(chat_summary.lua): positions, what is kept, and the first MAX_MEMBERS members,
those furthest behind first.

A chat keeps at most the server's --chat-max-messages messages and
--chat-max-bytes bytes of bodies (retention) and drops what every member has
seen; a member whose unseen messages retention dropped has a gap: it is told of it
(a Gap in FetchPending and Subscribe) and carries on from the first kept message.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .capped import AT_ONCE, first_names

MAX_CHATS = 100  # chats one view lists
MAX_MEMBERS = 50  # members shown per chat, furthest behind first (with the count)


async def chats_view(chats: Any) -> dict[str, Any]:
    names, more = await first_names(chats.names, MAX_CHATS)
    gate = asyncio.Semaphore(AT_ONCE)

    async def row(chat_id: str) -> dict[str, Any] | None:
        async with gate:
            s = await chats.summary(chat_id, MAX_MEMBERS)
        if s is None:
            return None  # gone since the listing saw it
        members = [{"user": user, "seen": seen, "unread": s.unread(seen), "missed": s.missed(seen)}
                   for user, seen in s.members]
        return {"name": chat_id, "last_id": s.last_id, "first_id": s.first_id, "kept": s.kept,
                "kept_bytes": s.kept_bytes, "member_count": s.member_count, "members": members,
                "gaps": sum(1 for m in members if m["missed"])}

    rows = [r for r in await asyncio.gather(*(row(n) for n in names)) if r is not None]
    most_messages, most_bytes = chats.retention
    return {"items": rows, "more": more, "limit": MAX_CHATS, "members_limit": MAX_MEMBERS,
            "retention": {"max_messages": most_messages, "max_bytes": most_bytes}}
