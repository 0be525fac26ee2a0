"""``python -m bench [--quick] [--scenario NAME ...]``: run, print one table, save JSON.

Run from the repository root (``make bench`` does). Each scenario starts its own
Valkey and concord-server subprocesses on free 127.0.0.1 ports and stops them before
the next one begins, so scenarios do not disturb each other.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
from pathlib import Path

from .harness import code_digest, machine_info, raise_nofile, scratch_dir
from .report import Row, arena, header, save, table
from .scenarios import NAMES, Context, module_name

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
# The peer arena (--peers): the scenarios that measure Concord against other systems
# on the same machine in the same run, and mark those rows with Row.peer.
PEER_SCENARIOS = ("handoff", "peers-queue", "chat-latency")


def peer_scenarios() -> list[str]:
    """The arena's scenarios whose module exists in this checkout (one still being
    written is left out, with a note)."""
    present = []
    for name in PEER_SCENARIOS:
        if importlib.util.find_spec(f"{__package__}.scenarios.{module_name(name)}") is None:
            print(f"peer arena: no scenario {name} in this checkout, left out", file=sys.stderr)
        else:
            present.append(name)
    return present


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description="Run Concord's benchmark scenarios; print one markdown table and save the results as JSON.")
    p.add_argument("--quick", action="store_true", help="smoke run (~1 min): fewer calls, shorter runs, 1 repetition")
    p.add_argument("--scenario", action="append", choices=NAMES, help="run only this scenario (repeatable)")
    p.add_argument("--peers", action="store_true",
                   help=f"the peer arena: run {', '.join(PEER_SCENARIOS)} (with any --scenario given) and print "
                        "the arena table (Concord next to each peer) after the normal one")
    p.add_argument("--reps", type=int, help="repetitions per figure; medians are reported (default 5, quick 1)")
    p.add_argument("--out", type=Path, default=RESULTS, help=f"JSON results file (default {RESULTS})")
    p.add_argument("--profile", type=Path, metavar="DIR",
                   help="run the server under cProfile and save DIR/<scenario>.prof (slows it down)")
    p.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    reps = args.reps or (1 if args.quick else 5)
    if args.peers:
        names = list(dict.fromkeys([*(args.scenario or ()), *peer_scenarios()]))
    else:
        names = args.scenario or list(NAMES)
    nofile = raise_nofile()  # scale opens thousands of calls; the server inherits this limit
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    settings = {"quick": args.quick, "reps": reps, "scenarios": names, "peers": args.peers,
                "rlimit_nofile": list(nofile)}
    rows: list[Row] = []
    details: dict = {}
    started = time.monotonic()
    with scratch_dir() as tmp:
        ctx = Context(quick=args.quick, reps=reps, tmp=tmp,
                      profile_dir=args.profile.resolve() if args.profile else None)
        for name in names:
            t0 = time.monotonic()
            print(f"running {name} ...", file=sys.stderr, flush=True)
            scenario = importlib.import_module(f".scenarios.{module_name(name)}", __package__)
            digest = code_digest()  # each scenario starts its own server from the code on disk
            scenario_rows, details[name] = scenario.run(ctx)
            details[name]["code_digest"] = digest
            rows += scenario_rows
            details[name]["elapsed_s"] = time.monotonic() - t0
            print(f"  {name} done in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
    settings["elapsed_s"] = time.monotonic() - started
    digests = {d["code_digest"] for d in details.values()} | {info["code_digest"], code_digest()}
    if len(digests) > 1:
        settings["warning"] = "server/client code changed on disk during the run: scenarios measured different code"
    print(header(info, settings))
    print()
    print(table(rows))
    if peers := arena(rows):
        print("\nPeer arena (Concord's figure next to each peer's, same machine, same run):\n")
        print(peers)
    save(args.out, info, settings, rows, details)
    print(f"\n(total {settings['elapsed_s']:.0f}s; JSON in {args.out})")
    missed = [r for r in rows if r.passed is False]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
