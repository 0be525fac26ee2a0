"""`concord autocomplete`: list, count, suggest, recent."""

from __future__ import annotations

import argparse

from ..autocomplete.v1 import autocomplete_pb2
from ._common import Base, Command, _dict, _table


class Commands(Base):
    def autocomplete_list(self, args: argparse.Namespace) -> None:
        found = self.entries("autocomplete", "ListIndexes", autocomplete_pb2.ListIndexesRequest, "indexes", "index")
        data = [{"index": s.index, "size": s.size} for s in found]
        self.emit(data, _table(data, ["index", "size"]) if data else "(no autocomplete indexes)")

    def autocomplete_count(self, args: argparse.Namespace) -> None:
        r = self.call("autocomplete", "Count", autocomplete_pb2.CountRequest(index=args.index, prefix=args.prefix))
        starting = f" starting with {args.prefix!r}" if args.prefix else ""
        self.emit({"index": args.index, "prefix": args.prefix, "count": r.count},
                  f"index {args.index!r}: {r.count} name(s){starting}")

    def autocomplete_suggest(self, args: argparse.Namespace) -> None:
        order = autocomplete_pb2.SUGGEST_ORDER_SCORE if args.by_score else autocomplete_pb2.SUGGEST_ORDER_NAME
        r = self.call("autocomplete", "Suggest", autocomplete_pb2.SuggestRequest(
            index=args.index, prefix=args.prefix, limit=args.limit, order=order))
        d = {"index": args.index, "prefix": args.prefix, **_dict(r)}
        rows = [{"name": s.name, "score": f"{s.score:g}"} for s in r.suggestions]
        text = _table(rows, ["name", "score"]) if rows else f"(no names in {args.index!r} start with {args.prefix!r})"
        if r.truncated:
            text += "\n(the best of the names examined, not necessarily of all: see the README's Autocomplete API)"
        self.emit(d, text)

    def autocomplete_recent(self, args: argparse.Namespace) -> None:
        r = self.call("autocomplete", "SuggestRecent", autocomplete_pb2.SuggestRecentRequest(
            user=args.user, prefix=args.prefix, limit=args.limit, include_infix=args.infix))
        self.emit({"user": args.user, "prefix": args.prefix, "contacts": list(r.contacts)},
                  "\n".join(r.contacts) if r.contacts else f"(no recent contacts of {args.user!r} match)")


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    ac = kinds.add_parser("autocomplete", help="name indexes and recent contacts").add_subparsers(
        dest="action", required=True)
    command(ac, "list", "autocomplete_list", "name indexes that hold names, with their sizes")
    count = command(ac, "count", "autocomplete_count", "how many names an index holds (that start with --prefix)")
    count.add_argument("index")
    count.add_argument("--prefix", default="", help="count only the names that start with it")
    suggest = command(ac, "suggest", "autocomplete_suggest", "the names of an index that start with PREFIX")
    suggest.add_argument("index")
    suggest.add_argument("prefix", help='case-insensitive ("" matches every name)')
    suggest.add_argument("--limit", type=int, default=10, metavar="N", help="at most N names, 1-1000 (default 10)")
    suggest.add_argument("--by-score", action="store_true", help="best score first (default: in name order)")
    recent = command(ac, "recent", "autocomplete_recent", "a user's recent contacts that start with PREFIX")
    recent.add_argument("user")
    recent.add_argument("prefix", nargs="?", default="", help="(default: every recent contact, most recent first)")
    recent.add_argument("--limit", type=int, default=10, metavar="N", help="at most N contacts, 1-1000 (default 10)")
    recent.add_argument("--infix", action="store_true", help="then the contacts that contain PREFIX elsewhere")
