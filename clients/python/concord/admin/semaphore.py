"""`concord semaphore`: list, describe, set-limit."""

from __future__ import annotations

import argparse

from ..semaphore.v1 import semaphore_pb2
from ._common import Base, Command, _dict, _table


def _semaphore_limit(text: str) -> int:
    """semaphore set-limit's LIMIT: a whole number, 1 or more (the server checks its maximum)."""
    try:
        limit = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= limit < 2**32:
        raise argparse.ArgumentTypeError(f"{limit} is not a limit (1 or more)")
    return limit


class Commands(Base):
    def semaphore_list(self, args: argparse.Namespace) -> None:
        self.list_names("semaphores", "semaphore", "ListSemaphores", semaphore_pb2.ListSemaphoresRequest)

    def semaphore_describe(self, args: argparse.Namespace) -> None:
        r = self.call("semaphore", "Describe", semaphore_pb2.DescribeRequest(name=args.name))
        d = {"name": args.name, **_dict(r)}
        if not r.holders and not r.waiters:
            limit = f"; limit {r.limit}" if r.limit else ""
            self.emit(d, f"semaphore {args.name!r} is not held (no holders, no waiters{limit})")
            return
        text = _table([d], ["name", "limit", "held", "waiters"])
        if r.holders:
            text += "\n\n" + _table(d["holders"], list(d["holders"][0]))
        self.emit(d, text)

    def semaphore_set_limit(self, args: argparse.Namespace) -> None:
        r = self.call("semaphore", "SetLimit", semaphore_pb2.SetLimitRequest(name=args.name, limit=args.limit))
        was = f"was {r.previous_limit}" if r.previous_limit else "had none"
        self.emit({"name": args.name, "limit": args.limit, "previous_limit": r.previous_limit},
                  f"semaphore {args.name!r}: limit {args.limit} ({was})")


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    sem = kinds.add_parser("semaphore", help="semaphores").add_subparsers(dest="action", required=True)
    command(sem, "list", "semaphore_list", "semaphores with holders or waiters")
    command(sem, "describe", "semaphore_describe", "limit, holders, waiters").add_argument("name")
    set_limit = command(sem, "set-limit", "semaphore_set_limit",
                        "set the semaphore's limit, kept until the next set-limit (the only way to change it)",
                        description="Sets the limit: an Acquire with another limit then fails "
                        "SEMAPHORE_LIMIT_MISMATCH. A lower limit takes no permit back (grants wait until the "
                        "held permits fit under it); a higher one admits the waiters that now fit at once.")
    set_limit.add_argument("name")
    set_limit.add_argument("limit", type=_semaphore_limit, metavar="LIMIT", help="most permits held at once (1 to the "
                           "server's --max-semaphore-limit)")
