"""`concord lock`: list, describe, force-release."""

from __future__ import annotations

import argparse

from ..lock.v1 import lock_pb2
from ._common import Base, Command, Failed, _confirm, _dict, _table


class Commands(Base):
    def lock_list(self, args: argparse.Namespace) -> None:
        self.list_names("locks", "lock", "ListLocks", lock_pb2.ListLocksRequest)

    def lock_describe(self, args: argparse.Namespace) -> None:
        r = self.call("lock", "Describe", lock_pb2.DescribeRequest(name=args.name))
        d = {"name": args.name, **_dict(r)}
        if not r.held and not r.waiters:  # a lock is its holder: there is nothing else to show
            self.emit(d, f"lock {args.name!r} is not held (no holder, no waiters)")
            return
        self.emit(d, _table([d], ["name", "held", "owner", "fencing_token", "ttl_remaining", "waiters"]))

    def lock_force_release(self, args: argparse.Namespace) -> None:
        if not args.yes and not _confirm(f"Force-release lock {args.name!r}? Its holder is not told and may "
                                         "still be writing; only fencing tokens protect you. [y/N] "):
            raise Failed("aborted: nothing changed")
        r = self.call("lock", "ForceRelease", lock_pb2.ForceReleaseRequest(name=args.name))
        d = {"name": args.name, **_dict(r)}
        text = (f"released lock {args.name!r} (was held by {r.owner!r}, fencing token {r.fencing_token})"
                if r.released else f"lock {args.name!r} was not held")
        self.emit(d, text)


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    lock = kinds.add_parser("lock", help="locks").add_subparsers(dest="action", required=True)
    command(lock, "list", "lock_list", "locks held or waited for")
    command(lock, "describe", "lock_describe", "holder, fencing token, TTL, waiters").add_argument("name")
    fr = command(lock, "force-release", "lock_force_release",
                 "DANGEROUS: take the lock from its holder and give it to the next waiter")
    fr.add_argument("name")
    fr.add_argument("--yes", action="store_true", help="do not ask for confirmation")
