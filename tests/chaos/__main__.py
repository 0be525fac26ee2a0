"""Re-runs the checker over a recorded campaign: ``python -m chaos <workdir>`` (from
tests/), where <workdir> holds chaos-history.jsonl and the server logs (the path a run
prints). Prints every violation with its events and the faults around them."""

from __future__ import annotations

import sys
from pathlib import Path

from . import checker
from .history import History


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    workdir = Path(argv[0])
    history = History.load(workdir / "chaos-history.jsonl")
    logs = {p.name: p.read_text(errors="replace") for p in sorted(workdir.glob("server*.log"))}
    results = checker.check(history.events, logs)
    index = {e.id: e for e in history.events}
    faults = [e for e in history.events if e.op == "fault"]
    for r in results:
        print(f"{r.rule}: checked {r.checked}, violations {len(r.violations)}")
    for v in (v for r in results for v in r.violations):
        print(v.render(index, faults))
    return 1 if any(r.violations for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
