"""`concord limit`: list the stored rate limits; show, set, check, reset, delete a key's."""

from __future__ import annotations

import argparse

from ..ratelimit.v1 import ratelimit_pb2
from ._common import Base, Command, _dict, _table, human_duration, parse_duration


class Commands(Base):
    def _limit_text(self, key: str, m: ratelimit_pb2.Limit) -> str:
        algorithm = ratelimit_pb2.Algorithm.Name(m.algorithm or ratelimit_pb2.ALGORITHM_GCRA)[len("ALGORITHM_"):]
        burst = f", burst {m.burst}" if m.burst else ""
        drain = ", drains over limit" if m.drain_over_limit else ""
        return (f"rate limit {key!r}: {m.rate} per {human_duration(m.period.ToNanoseconds() / 1e9)}{burst} "
                f"({algorithm.lower()}{drain})")

    def limit_list(self, args: argparse.Namespace) -> None:
        found = self.entries("ratelimit", "ListLimits", ratelimit_pb2.ListLimitsRequest, "limits", "key")
        data = [_dict(s) for s in found]
        rows = [{"key": s.key, "limit": self._limit_text(s.key, s.limit).split(": ", 1)[1], "remaining": s.remaining,
                 "full_in": human_duration(s.reset_after.ToNanoseconds() / 1e9), "waiters": s.waiters} for s in found]
        self.emit(data, _table(rows, ["key", "limit", "remaining", "full_in", "waiters"]) if rows
                  else "(no stored rate limits: `concord limit set KEY RATE` stores one)")

    def limit_show(self, args: argparse.Namespace) -> None:
        r = self.call("ratelimit", "GetLimit", ratelimit_pb2.GetLimitRequest(key=args.key))
        self.emit({"key": args.key, **_dict(r.limit)}, self._limit_text(args.key, r.limit))

    def limit_set(self, args: argparse.Namespace) -> None:
        limit = ratelimit_pb2.Limit(algorithm=ratelimit_pb2.Algorithm.Value("ALGORITHM_" + args.algorithm.upper()),
                                    rate=args.rate, burst=args.burst, drain_over_limit=args.drain)
        limit.period.FromNanoseconds(round(args.per * 1e9))
        r = self.call("ratelimit", "SetLimit", ratelimit_pb2.SetLimitRequest(key=args.key, limit=limit))
        was = self._limit_text(args.key, r.previous).split(": ", 1)[1] if r.HasField("previous") else "none"
        self.emit({"key": args.key, "limit": _dict(limit), "previous": _dict(r.previous) if r.HasField("previous")
                   else None}, f"{self._limit_text(args.key, limit)} (was {was})")

    def limit_check(self, args: argparse.Namespace) -> None:
        r = self.call("ratelimit", "Check", ratelimit_pb2.CheckRequest(key=args.key, hits=args.hits))
        d = {"key": args.key, "hits": args.hits, **_dict(r)}
        verdict = "allowed" if r.allowed else (
            f"refused, retry after {human_duration(r.retry_after.ToNanoseconds() / 1e9)}"
            if r.HasField("retry_after") else "refused: more than ever passes at once")
        self.emit(d, f"rate limit {args.key!r}: {args.hits} {verdict}; {r.remaining} left, full again in "
                     f"{human_duration(r.reset_after.ToNanoseconds() / 1e9)}")

    def limit_reset(self, args: argparse.Namespace) -> None:
        self.call("ratelimit", "Reset", ratelimit_pb2.ResetRequest(key=args.key))
        self.emit({"key": args.key, "reset": True}, f"rate limit {args.key!r}: reset (full again)")


    def limit_delete(self, args: argparse.Namespace) -> None:
        r = self.call("ratelimit", "DeleteLimit", ratelimit_pb2.DeleteLimitRequest(key=args.key))
        was = self._limit_text(args.key, r.previous).split(": ", 1)[1] if r.HasField("previous") else None
        self.emit({"key": args.key, "previous": _dict(r.previous) if r.HasField("previous") else None},
                  f"rate limit {args.key!r}: deleted (was {was})" if was else f"rate limit {args.key!r}: none was stored")


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    limit = kinds.add_parser("limit", help="rate limits").add_subparsers(dest="action", required=True)
    command(limit, "list", "limit_list", "every key with a stored limit, with what it allows now and its waiters")
    command(limit, "show", "limit_show", "the key's stored rate limit").add_argument("key")
    set_rate = command(limit, "set", "limit_set", "store the key's rate limit (the only way to change it)")
    set_rate.add_argument("key")
    set_rate.add_argument("rate", type=int, help="units per period")
    set_rate.add_argument("--per", type=parse_duration, default=1.0, help="the period (default 1s): 500ms, 1m, ...")
    set_rate.add_argument("--burst", type=int, default=0, help="GCRA and token bucket: units at once (default: rate)")
    set_rate.add_argument("--algorithm", default="gcra", choices=["gcra", "token_bucket", "sliding_log",
                                                                   "sliding_window", "fixed_window", "concurrency"])
    set_rate.add_argument("--drain", action="store_true", help="a refused check takes what is left")
    check = command(limit, "check", "limit_check", "peek at the key (or take --hits units) under its stored limit")
    check.add_argument("key")
    check.add_argument("--hits", type=int, default=0, help="units to take (default 0: peek)")
    command(limit, "reset", "limit_reset", "forget what the key counted (its stored limit stays)").add_argument("key")
    command(limit, "delete", "limit_delete", "forget the key's stored limit and what it counted").add_argument("key")
