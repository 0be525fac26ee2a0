"""`concord rwlock`: list, describe."""

from __future__ import annotations

import argparse

from ..rwlock.v1 import rwlock_pb2
from ._common import Base, Command, _dict, _table


_MODE_NAMES = {rwlock_pb2.MODE_READ: "read", rwlock_pb2.MODE_WRITE: "write"}


class Commands(Base):
    def rwlock_list(self, args: argparse.Namespace) -> None:
        found = self.entries("rwlock", "ListReadWriteLocks", rwlock_pb2.ListReadWriteLocksRequest, "locks", "name")
        data = [{"name": s.name, "writer": _dict(s.writer) if s.HasField("writer") else None, "readers": s.readers,
                 "waiters": s.waiters} for s in found]
        rows = [{"name": s.name, "writer": s.writer.owner if s.HasField("writer") else "-",
                 "fencing_token": s.writer.fencing_token if s.HasField("writer") else "-",
                 "ttl_remaining": _dict(s.writer)["ttl_remaining"] if s.HasField("writer") else "-",
                 "readers": s.readers, "waiters": s.waiters} for s in found]
        self.emit(data, _table(rows, ["name", "writer", "fencing_token", "ttl_remaining", "readers", "waiters"])
                  if rows else "(no rwlocks)")

    def rwlock_describe(self, args: argparse.Namespace) -> None:
        r = self.call("rwlock", "Describe", rwlock_pb2.DescribeRequest(name=args.name))
        d = {"name": args.name, "writer": None, **_dict(r)}  # null when no writer holds it
        if not r.HasField("writer") and not r.readers and not r.waiters:
            self.emit(d, f"rwlock {args.name!r} is not held (no writer, no readers, no waiters)")
            return
        holders = ([{"mode": "write", **_dict(r.writer)}] if r.HasField("writer") else []) + [
            {"mode": "read", **_dict(h)} for h in r.readers]
        text = f"rwlock {args.name!r}: " + ("held by a writer" if r.HasField("writer") else
                                              f"held by {len(r.readers)} reader(s)") + f", {len(r.waiters)} waiting"
        if holders:
            text += "\n\n" + _table(holders, ["mode", "owner", "fencing_token", "ttl_remaining"])
        if r.waiters:
            text += "\n\nwaiting, first in line first:\n" + _table(
                [{"position": i, "mode": _MODE_NAMES.get(w.mode, str(w.mode)), "owner": w.owner}
                 for i, w in enumerate(r.waiters, 1)], ["position", "mode", "owner"])
        self.emit(d, text)


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    rw = kinds.add_parser("rwlock", help="read-write locks").add_subparsers(dest="action", required=True)
    command(rw, "list", "rwlock_list", "read-write locks held or waited for: writer, readers, waiters")
    command(rw, "describe", "rwlock_describe", "the writer or the readers, and the waiters in line with their modes"
            ).add_argument("name")
