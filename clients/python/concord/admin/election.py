"""`concord election`: list, leader, observe, campaign -- COMMAND, resign."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ..election.v1 import election_pb2
from ..elections import Leader
from ..errors import LeadershipLost, NotLeader
from ._common import Base, Command, Failed, _bytes_text, _confirm, _dict, parse_duration, _table, _time


def _leader_dict(m: election_pb2.Leadership) -> dict[str, Any]:
    """A leader in JSON: its value is base64, as protobuf's JSON writes bytes."""
    return {**_dict(m), "expires_at": _time(m, "expires_at")}


def _leader_row(m: election_pb2.Leadership) -> dict[str, Any]:
    return {"candidate": m.candidate, "term": m.term, "expires_at": _time(m, "expires_at"),
            "value": _bytes_text(m.value)}


def _change_leader(leader: Leader | None) -> dict[str, Any] | None:
    """A leader seen by the client's observe() as `election leader` writes one in JSON."""
    if leader is None:
        return None
    m = election_pb2.Leadership(candidate=leader.candidate, value=leader.value, term=leader.term)
    if leader.expires_at is not None:
        m.expires_at.FromDatetime(leader.expires_at)
    return _leader_dict(m)


def _command_text(command: Sequence[str], shown: int = 80) -> str:
    """A command line for a one-line message: quoted as a shell would, on one line, cut when long."""
    text = shlex.join(command).replace("\n", "\\n")
    return text if len(text) <= shown else text[:shown] + "…"


def _terminate(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace`` seconds."""
    try:
        proc.terminate()
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except ProcessLookupError:
        pass


def _exit_status(returncode: int) -> int:
    """A child's status as a shell gives it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


class Commands(Base):
    def election_list(self, args: argparse.Namespace) -> None:
        """The elections with a leader or candidates; a leader's value is its first
        1024 bytes (value_truncated), `election leader` has it whole."""
        found = self.entries("election", "ListElections", election_pb2.ListElectionsRequest, "elections", "election")
        data = [{"election": s.election, "leader": _leader_dict(s.leader) if s.HasField("leader") else None,
                 "value_truncated": s.value_truncated, "candidates": s.candidates} for s in found]
        rows = [{"election": s.election, **(_leader_row(s.leader) if s.HasField("leader") else
                                            {"candidate": "-", "term": "-", "expires_at": "-", "value": "-"}),
                 "candidates": s.candidates} for s in found]
        self.emit(data, _table(rows, ["election", "candidate", "term", "expires_at", "candidates", "value"])
                  if rows else "(no elections)")

    def election_leader(self, args: argparse.Namespace) -> None:
        r = self.call("election", "Leader", election_pb2.LeaderRequest(election=args.name))
        leader = _leader_dict(r.leader) if r.HasField("leader") else None
        d = {"election": args.name, "leader": leader, "candidates": r.candidates}
        waiting = f"{r.candidates} candidate(s) waiting"
        if leader is None:
            self.emit(d, f"election {args.name!r} has no leader ({waiting})")
            return
        self.emit(d, _table([{"election": args.name, **_leader_row(r.leader), "candidates": r.candidates}],
                            ["election", "candidate", "term", "expires_at", "candidates", "value"]))

    def election_observe(self, args: argparse.Namespace) -> None:
        """The leader now, then every change as it happens, until Ctrl-C or --count
        lines: the client's observe(), which resumes after the last change printed
        when the connection drops, so none is missed or printed twice."""
        shown = 0
        with self.client.election(args.name).observe(after=args.after) as changes:
            for change in changes:
                if not shown:  # the stream is live: on stderr, so --json output stays one change per line
                    print(f"observing election {args.name!r} (Ctrl-C to stop)", file=sys.stderr, flush=True)
                leader = _change_leader(change.leader)
                d = {"election": args.name, "position": change.position, "gap": change.gap, "leader": leader}
                who = (f"{leader['candidate']} leads, term {leader['term']}, value "
                       f"{_bytes_text(change.leader.value)}" if change.leader else "nobody leads")
                gap = " (changes before this one were no longer kept)" if change.gap else ""
                self.emit(d, f"{change.position}  {who}{gap}")
                shown += 1
                if args.count and shown >= args.count:
                    return

    def election_campaign(self, args: argparse.Namespace) -> int:
        """Campaigns (a Lead stream, which keeps the leadership while it is open),
        runs the command while leading, resigns when it exits and returns its exit
        status. A lost leadership terminates the command and fails."""
        election = self.client.election(args.name, ttl=args.ttl, candidate=args.candidate)
        now = self.call("election", "Leader", election_pb2.LeaderRequest(election=args.name))  # checks the name too
        if now.HasField("leader"):
            print(f"campaigning in election {args.name!r}, led by {now.leader.candidate!r} now, "
                  f"{now.candidates} other candidate(s) waiting" + (" (Ctrl-C to stop)" if args.wait is None else ""),
                  file=sys.stderr, flush=True)
        lost_while_running = threading.Event()
        try:
            with election.campaign(args.value.encode(), timeout=args.wait) as leadership:
                print(f"leading election {args.name!r}, term {leadership.term}: running "
                      f"{_command_text(args.command)}", file=sys.stderr, flush=True)
                env = {**os.environ, "CONCORD_ELECTION": args.name, "CONCORD_ELECTION_TERM": str(leadership.term)}
                try:
                    proc = subprocess.Popen(args.command, env=env)
                except OSError as exc:
                    raise Failed(f"cannot run {args.command[0]!r}: {exc.strerror}") from None

                def stop_when_lost() -> None:
                    leadership.wait_lost()
                    if proc.poll() is None:
                        lost_while_running.set()
                        _terminate(proc, args.grace)

                threading.Thread(target=stop_when_lost, daemon=True, name="concord-campaign-watch").start()
                try:
                    status = proc.wait()
                except KeyboardInterrupt:  # the command, in the same process group, got the Ctrl-C too
                    _terminate(proc, args.grace)
                    raise
                lost = lost_while_running.is_set()
                if not lost:
                    try:  # at once, so whoever looks next sees the next leader
                        election.resign(leadership.term)
                    except NotLeader:
                        lost = True
        except LeadershipLost:  # our own resign's LOST, seen by the stream as the block ended
            pass
        if lost_while_running.is_set():
            raise Failed(f"leadership of election {args.name!r} (term {leadership.term}) was lost: "
                         f"terminated {_command_text(args.command)} ({NotLeader.reason})")
        if lost:
            raise Failed(f"leadership of election {args.name!r} (term {leadership.term}) had ended when "
                         f"{_command_text(args.command)} exited (with {_exit_status(status)}): it may have run "
                         f"unprotected at its end ({NotLeader.reason})")
        return _exit_status(status)

    def election_resign(self, args: argparse.Namespace) -> None:
        """Ends a term from outside: the leader's Lead stream says LOST, and the next
        candidate leads. The term is the current leader's unless --term names one,
        so a leadership that changed meanwhile is left alone."""
        term = args.term
        if term is None:
            r = self.call("election", "Leader", election_pb2.LeaderRequest(election=args.name))
            if not r.HasField("leader"):
                self.emit({"election": args.name, "resigned": False, "term": None},
                          f"election {args.name!r} has no leader")
                return
            term, who = r.leader.term, f"term {r.leader.term} of {r.leader.candidate!r}"
        else:
            who = f"term {term}"
        if not args.yes and not _confirm(f"End {who} in election {args.name!r}? Its leader is told "
                                         "(its Lead stream ends) and the next candidate leads. [y/N] "):
            raise Failed("aborted: nothing changed")
        self.call("election", "Resign", election_pb2.ResignRequest(election=args.name, term=term))
        self.emit({"election": args.name, "resigned": True, "term": term},
                  f"ended {who} in election {args.name!r}")


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    election = kinds.add_parser("election", help="leader elections").add_subparsers(dest="action", required=True)
    command(election, "list", "election_list", "elections with a leader or candidates: leader, term, candidates")
    command(election, "leader", "election_leader", "the leader now: candidate, value, term, expiry; candidates waiting"
            ).add_argument("name")
    observe = command(election, "observe", "election_observe",
                      "print the leader now, then each change as it happens, until Ctrl-C")
    observe.add_argument("name")
    observe.add_argument("--count", type=int, default=0, metavar="N",
                         help="stop after N lines, the first being the leader now (default: until Ctrl-C)")
    observe.add_argument("--after", type=int, default=0, metavar="POSITION",
                         help="start after this change's position (as printed), not with the leader now")
    camp = command(election, "campaign", "election_campaign",
                   "lead, run COMMAND while leading, resign when it exits; exit with its status",
                   description="Waits to lead the election, then runs COMMAND with CONCORD_ELECTION and "
                   "CONCORD_ELECTION_TERM (pass the term to what it writes) in its environment. A Lead stream keeps "
                   "the leadership while COMMAND runs; when COMMAND exits the leadership is resigned and its exit "
                   "status is this command's. If the leadership is lost (its TTL ran out while the server could "
                   "not renew it, or someone resigned it), COMMAND is terminated (SIGTERM, then SIGKILL after "
                   "--grace) and this command fails with NOT_LEADER, exit 1.")
    camp.add_argument("name")
    camp.add_argument("value", help="the value the leader publishes (UTF-8 text, such as host:port)")
    camp.add_argument("command", nargs="+", metavar="-- COMMAND", help="the command to run while leading, after --")
    camp.add_argument("--ttl", type=parse_duration, default=10.0,
                      help="how long the leadership outlives a lost connection (default 10s)")
    camp.add_argument("--timeout", dest="wait", type=parse_duration, metavar="DURATION",
                      help="give up if not elected within this long (default: wait until elected)")
    camp.add_argument("--candidate", default="", help="a label observers see (default: this client's address)")
    camp.add_argument("--grace", type=parse_duration, default=10.0, metavar="DURATION",
                      help="after a lost leadership, how long COMMAND has to exit after SIGTERM (default 10s)")
    resign = command(election, "resign", "election_resign",
                     "end the leader's term from outside: it is told, and the next candidate leads")
    resign.add_argument("name")
    resign.add_argument("--term", type=int, help="end this term only (default: the current leader's)")
    resign.add_argument("--yes", action="store_true", help="do not ask for confirmation")
