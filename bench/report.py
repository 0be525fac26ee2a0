"""The one table the bench prints, and the JSON it saves.

Every figure is a Row: a value, optionally the baseline it is compared with (a figure
measured in the same run, named), the ratio value/baseline, and a target with its
verdict. Units drive formatting so scenarios hand over raw SI numbers (seconds, bytes).
A row whose baseline is another system's figure names that peer (``Row.peer``); the
peer arena table (``arena``) lists those rows again, Concord next to each peer.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Row:
    scenario: str
    metric: str
    value: float
    unit: str  # "s" (shown as µs/ms), "/s", "B", "x" (plain ratio), "" (count)
    baseline: float | None = None
    baseline_label: str = ""
    target: str = ""  # e.g. "≤ 2.6× empty", "≤ 2 ms"
    passed: bool | None = None
    note: str = ""
    runs: list[float] = field(default_factory=list)  # per-repetition values behind the median
    # Peer arena: the name of the other system (e.g. "Redis Streams", "etcd") whose
    # figure is this row's baseline. Then value is Concord's figure, baseline the
    # peer's same figure from the same run, and the ratio Concord ÷ peer; arena()
    # lists these rows. Empty for every other row.
    peer: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or not self.baseline or math.isnan(self.value):
            return None
        return self.value / self.baseline


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if math.isnan(value):
        return "n/a"
    if unit == "s":
        if value < 1e-3:
            return f"{value * 1e6:.0f} µs"
        if value < 1:
            return f"{value * 1e3:.2f} ms"
        return f"{value:.2f} s"
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "B":
        return f"{value / 2**20:.1f} MiB" if value >= 2**20 else f"{value:,.0f} B"
    if unit == "x":
        return f"{value:.2f}"
    if unit == "%":
        return f"{value:.1f}%" if abs(value) < 10 else f"{value:.0f}%"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def spread(row: Row) -> str:
    """The range of the repetitions behind a median, "[low–high]"; empty for one run."""
    runs = [v for v in row.runs if isinstance(v, (int, float)) and not math.isnan(v)]
    if len(runs) < 2:
        return ""
    return f"[{fmt(min(runs), row.unit)}–{fmt(max(runs), row.unit)}]"


def _verdict(row: Row) -> str:
    return {True: "✅", False: "❌", None: ""}[row.passed]


def table(rows: list[Row]) -> str:
    lines = ["| scenario | metric | value | baseline | ratio / target | pass? |", "|---|---|---|---|---|---|"]
    for r in rows:
        base = f"{fmt(r.baseline, r.unit)} ({r.baseline_label})" if r.baseline is not None else ""
        parts = []
        if r.ratio is not None:
            parts.append(f"{r.ratio:.2f}×")
        if r.target:
            parts.append(f"target {r.target}")
        value = " ".join(filter(None, (fmt(r.value, r.unit), spread(r)))) + (f" ({r.note})" if r.note else "")
        lines.append(f"| {r.scenario} | {r.metric} | {value} | {base} | {'; '.join(parts)} | {_verdict(r)} |")
    return "\n".join(lines)


def arena(rows: list[Row]) -> str:
    """The peer arena's table: the rows whose baseline is a peer's figure (``Row.peer``
    set), Concord's figure next to the peer's and Concord ÷ peer. Empty when none."""
    peers = [r for r in rows if r.peer]
    if not peers:
        return ""
    lines = ["| scenario | figure | Concord | peer | peer's figure | Concord ÷ peer | target | pass? |",
             "|---|---|---|---|---|---|---|---|"]
    for r in peers:
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}×"
        lines.append(f"| {r.scenario} | {r.metric} | {' '.join(filter(None, (fmt(r.value, r.unit), spread(r))))} "
                     f"| {r.peer} | {fmt(r.baseline, r.unit)} "
                     f"| {ratio} | {r.target} | {_verdict(r)} |")
    return "\n".join(lines)


def header(info: dict, args: dict) -> str:
    mode = "quick" if args.get("quick") else "full"
    text = (
        f"Concord bench — commit {info['commit']} (code {info['code_digest']}), {mode} run, "
        f"{args.get('reps')} repetitions (medians)\n"
        f"{info['usable_cores']}/{info['cores']} cores ({info['cpu']}), {info['implementation']} {info['python']}, "
        f"grpcio {info['grpcio']}, redis-py {info['redis_py']}, {info['platform']}"
    )
    return text + (f"\nWARNING: {args['warning']}" if args.get("warning") else "")


def save(path: Path, info: dict, args: dict, rows: list[Row], details: dict) -> None:
    """Writes this run's scenarios into the results file, keeping the latest results
    of scenarios this run did not include; each scenario's details record the
    machine and settings it was measured with."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(path.read_text()) if path.exists() else {}
    ran = set(details)
    for name in ran:
        details[name] = {**details[name], "machine": info, "args": args}
    doc = {"machine": info, "args": args,
           "rows": [r for r in old.get("rows", []) if r["scenario"] not in ran]
           + [{**asdict(r), "ratio": r.ratio} for r in rows],
           "details": {**{k: v for k, v in old.get("details", {}).items() if k not in ran}, **details}}
    path.write_text(json.dumps(_clean(doc), indent=1, allow_nan=False, default=str) + "\n")


def _clean(o: object) -> object:
    """NaN (no data, e.g. no handoffs at all) becomes null: JSON has no NaN."""
    if isinstance(o, float) and math.isnan(o):
        return None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o
