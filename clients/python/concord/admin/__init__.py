"""`concord`: the operator's command line, over the Python client.

    concord lock list | lock describe NAME | lock force-release NAME [--yes]
    concord semaphore list | semaphore describe NAME | semaphore set-limit NAME LIMIT
    concord queue list | queue describe NAME | queue dead NAME | queue retry-dead NAME [TASK_ID...]
    concord queue task NAME TASK_ID | queue wait NAME TASK_ID [--timeout S] | queue pause | resume NAME [--group G]
    concord queue policy NAME [--keep-succeeded N] [--succeeded-for DURATION] [--keep-dead N] [--dead-for DURATION]
    concord queue schedules NAME | queue schedule NAME SCHEDULE [--cron EXPR [--tz ZONE] | --every DURATION]
        [--type T] [--payload TEXT] [--priority N] [--max-attempts N] [--missed once|skip] [--grace DURATION]
        [--paused] [--update]
    concord queue schedule-pause | schedule-resume | schedule-delete NAME SCHEDULE
    concord chat list | chat describe CHAT | chat tail CHAT --as USER
    concord rwlock list | rwlock describe NAME
    concord election list | election leader NAME | election observe NAME [--count N] [--after POSITION]
    concord election campaign NAME VALUE [--ttl D] [--timeout D] [--candidate C] [--grace D] -- COMMAND...
    concord election resign NAME [--term T] [--yes]
    concord autocomplete list | autocomplete count INDEX [--prefix P]
    concord autocomplete suggest INDEX PREFIX [--limit N] [--by-score]
    concord autocomplete recent USER [PREFIX] [--limit N] [--infix]
    concord files list | files describe GROUP

Tables by default (durations in human units: 29.5s, 1h2m), ``--json`` for scripts
(integers are JSON numbers, durations and times as protobuf's JSON mapping writes
them: "29.500s"). The server is ``--target`` or $CONCORD_TARGET (default
127.0.0.1:50051). Exit codes: 0 ok, 1 error (one line on stderr, no traceback, ending
with the server's ErrorInfo reason: "(INVALID_ARGUMENT)"), 2 usage; ``queue wait`` adds
its own (WAIT_EXIT_CODES); ``election campaign`` exits with its command's status.

One module per kind (lock.py, queue.py, ...): a ``Commands`` mixin whose methods are
the handlers its ``add_commands`` names; _common.py holds what they share (calls,
tables, JSON, durations). The console script is ``concord.admin:main``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import grpc

from .._version import __version__
from ..client import DEFAULT_TARGET, Client
from ..errors import ConcordError, from_rpc_error
from . import autocomplete, chat, election, files, limit, lock, queue, rwlock, semaphore
from ._common import Failed
from .queue import WAIT_CANCELLED, WAIT_DEAD, WAIT_EXIT_CODES, WAIT_INTERRUPTED, WAIT_NOT_FINISHED

__all__ = ["WAIT_CANCELLED", "WAIT_DEAD", "WAIT_EXIT_CODES", "WAIT_INTERRUPTED", "WAIT_NOT_FINISHED", "Admin",
           "main", "parser"]

# One module per kind: its commands (a Commands mixin, one method per handler) and its
# parser (add_commands), in the order `concord --help` lists them.
KINDS = (lock, semaphore, rwlock, election, limit, queue, chat, autocomplete, files)


class Admin(*(kind.Commands for kind in KINDS)):  # type: ignore[misc]
    """Every command of every kind: a method per command, named by its parser's handler."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="concord", description="Inspect and repair a Concord server.")
    p.add_argument("--version", action="version", version=f"concord {__version__}")
    p.add_argument("--target", default=os.environ.get("CONCORD_TARGET", DEFAULT_TARGET),
                   help="host:port of the server (env CONCORD_TARGET; default %(default)s)")
    p.add_argument("--json", action="store_true", help="JSON output for scripts")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default %(default)s)")
    env = os.environ.get
    p.add_argument("--token", default=env("CONCORD_TOKEN"),
                   help="bearer token, for a server run with --auth-tokens (env CONCORD_TOKEN)")
    p.add_argument("--tls", action="store_true", default=bool(env("CONCORD_TLS")),
                   help="connect over TLS, trusting the system's CAs (env CONCORD_TLS)")
    p.add_argument("--ca", default=env("CONCORD_CA"), help="PEM file of the CA to trust; implies --tls (env CONCORD_CA)")
    p.add_argument("--cert", default=env("CONCORD_CERT"),
                   help="PEM client certificate, for mutual TLS; with --key (env CONCORD_CERT)")
    p.add_argument("--key", default=env("CONCORD_KEY"), help="PEM key of --cert (env CONCORD_KEY)")
    kinds = p.add_subparsers(dest="kind", required=True,
                             metavar="{lock,semaphore,rwlock,election,limit,queue,chat,autocomplete,files}")

    def command(kind: argparse._SubParsersAction, name: str, handler: str, help: str,
                **more: Any) -> argparse.ArgumentParser:
        sub = kind.add_parser(name, help=help, **more)
        sub.set_defaults(handler=handler)
        return sub

    for kind in KINDS:
        kind.add_commands(kinds, command)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)  # exits 2 on bad usage
    if getattr(args, "check", None):
        args.check(args)  # usage argparse cannot check alone; exits 2 too
    try:
        with Client(args.target, timeout=args.timeout, tls=args.tls, root_certificates=args.ca,
                    client_cert=args.cert, client_key=args.key, token=args.token) as client:
            return getattr(Admin(client, args.json), args.handler)(args) or 0
    except KeyboardInterrupt:  # the way to stop `chat tail`; `queue wait` must not look like success
        return WAIT_INTERRUPTED if args.handler in INTERRUPTED_FAILS else 0
    except (Failed, ConcordError) as exc:
        print(_error_line(exc), file=sys.stderr)
        return 1
    except grpc.RpcError as exc:
        print(_error_line(from_rpc_error(exc)), file=sys.stderr)
        return 1


# Commands that Ctrl-C stops before they are done (exit 130), not the way to end them.
INTERRUPTED_FAILS = {"queue_wait", "election_campaign"}


def _error_line(exc: Exception) -> str:
    """``concord: MESSAGE (REASON)``: the ErrorInfo reason too, for scripts to match."""
    reason = getattr(exc, "reason", "")
    return f"concord: {exc} ({reason})" if reason and reason not in str(exc) else f"concord: {exc}"
