"""The console's views of the kinds beyond locks, semaphores and queues: read-write
locks and elections (the coordination page), chats, autocomplete indexes, file
groups and rate limits; one snapshot part each, and the method a token must be allowed to call to
see it (the listing RPC of the same kind, as app.VIEWS says for the others).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .views_autocomplete import SUGGEST, SuggestBox, indexes_view
from .views_chats import chats_view
from .views_coordination import elections_view, rwlocks_view
from .views_files import file_groups_view
from . import views_limits
from .views_limits import LIST_LIMITS, LimitActions, limits_view

LIST_RWLOCKS = "/concord.rwlock.v1.ReadWriteLockService/ListReadWriteLocks"
LIST_ELECTIONS = "/concord.election.v1.ElectionService/ListElections"
LIST_CHATS = "/concord.chat.v1.ChatService/ListAllChats"
LIST_INDEXES = "/concord.autocomplete.v1.AutocompleteService/ListIndexes"
LIST_FILE_GROUPS = "/concord.files.v1.FileService/ListFileGroups"

VIEWS = (("rwlocks", LIST_RWLOCKS, lambda p: rwlocks_view(p.rwlocks)),
         ("elections", LIST_ELECTIONS, lambda p: elections_view(p.elections)),
         ("chats", LIST_CHATS, lambda p: chats_view(p.chats)),
         ("indexes", LIST_INDEXES, lambda p: indexes_view(p.autocomplete)),
         ("file_groups", LIST_FILE_GROUPS, lambda p: file_groups_view(p.files)),
         ("limits", LIST_LIMITS, lambda p: limits_view(p.ratelimits)))


def may(viewer: Any) -> dict[str, bool]:
    """What /api/me says of these views."""
    return {"list_rwlocks": viewer.may(LIST_RWLOCKS), "list_elections": viewer.may(LIST_ELECTIONS),
            "list_chats": viewer.may(LIST_CHATS), "list_indexes": viewer.may(LIST_INDEXES),
            "list_file_groups": viewer.may(LIST_FILE_GROUPS), "suggest": viewer.may(SUGGEST),
            **views_limits.may(viewer)}


def add_routes(console: Any, app: web.Application) -> None:
    SuggestBox(console).add_routes(app)
    LimitActions(console).add_routes(app)
