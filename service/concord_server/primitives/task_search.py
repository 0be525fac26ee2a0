"""Searching a queue's tasks (SearchTasks): the query, the page token, and what one
call of lua/queue_search.lua may cost.

A search walks the queue's per-state sets (ready, delayed, leased, dead, done) in
score order. Each call looks at no more than EXAMINE tasks and reads no more than
READ_BYTES of their payloads and errors (the task that passes it is the last), so a
call costs about the same whether the search is dense or finds nothing; the page
token is the position after the last task looked at, "<set>:<score>:<id>", found
again by the script however many tasks came or went meanwhile.

Imports no grpc and no other primitive: queue.py runs the script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import InvalidArgument

EXAMINE = 500  # tasks one call looks at: a sparse first page within 10 empty calls (bench console-search)
READ_BYTES = 4 * 1024 * 1024  # payload and error bytes one call reads
MAX_PAGE = 100
DEFAULT_PAGE = 50
MAX_NEEDLE_BYTES = 256

# The sets the script walks, by number, and the states each holds.
SET_OF_STATE = {"ready": 1, "waiting": 1, "delayed": 2, "leased": 3, "dead": 4, "succeeded": 5, "cancelled": 5}
ALL_SETS = "12345"
_TOKEN = re.compile(r"([1-5]):(-?[0-9]{1,17}):([0-9a-f]{12})")


@dataclass(frozen=True)
class SearchQuery:
    """Every filter given must match; empty ones match all."""

    task_id: str = ""
    type: str = ""
    type_prefix: str = ""
    states: frozenset[str] = field(default_factory=frozenset)  # SET_OF_STATE's keys; empty: all
    error_contains: str = ""  # ASCII letters match either case
    payload_contains: bytes = b""

    def sets(self) -> str:
        """ARGV[7]: the set numbers to walk, in order."""
        if not self.states:
            return ALL_SETS
        return "".join(sorted({str(SET_OF_STATE[s]) for s in self.states}))

    def done_state(self) -> str:
        """ARGV[8]: which finished state set 5 keeps ('' both)."""
        finished = self.states & {"succeeded", "cancelled"}
        return next(iter(finished)) if len(finished) == 1 else ""

    def filters(self) -> list[object]:
        """ARGV[12..16]."""
        return [self.task_id, self.type, self.type_prefix, self.error_contains.encode().lower(),
                self.payload_contains]


@dataclass(frozen=True)
class Cursor:
    """Where the next page starts: after task ``task_id`` scored ``score`` in set ``set``."""

    set: int
    score: str
    task_id: str

    def token(self) -> str:
        return f"{self.set}:{self.score}:{self.task_id}"

    @staticmethod
    def parse(token: str) -> Cursor | None:
        """The cursor of a page token this server handed out (None: the first page);
        InvalidArgument for anything else."""
        if not token:
            return None
        found = _TOKEN.fullmatch(token)
        if not found:
            raise InvalidArgument("page_token is not one this server issued", field="page_token")
        return Cursor(int(found[1]), found[2], found[3])

    def args(self) -> list[object]:
        """ARGV[9..11]."""
        return [self.set, self.score, self.task_id]


START = ["", "", ""]  # ARGV[9..11] of a first page
