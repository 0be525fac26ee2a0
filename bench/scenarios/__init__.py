"""One module per scenario; each exposes ``run(ctx) -> (rows, details)``.

``details`` is whatever raw data backs the rows (per-run figures, settings); it goes
to the JSON file only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Context:
    quick: bool
    reps: int
    tmp: Path  # scratch directory, removed after the run
    profile_dir: Path | None  # when set, the server runs under cProfile and saves here

    def profile(self, name: str) -> Path | None:
        return None if self.profile_dir is None else self.profile_dir / f"{name}.prof"


NAMES = ("cost", "handoff", "scale", "semaphore-cost", "semaphore-handoff", "rwlock-cost", "election-handoff",
         "deadlock-cost", "queue-cost", "queue-delay", "peers-queue",
         "queue-wait", "schedule-lateness", "chat-latency", "chat-fetch", "autocomplete", "files", "load", "redis-io",
         "replica-acks", "ratelimit", "queue-groups", "console-search")


def module_name(name: str) -> str:
    """The module that implements scenario ``name`` (``semaphore-cost`` -> ``semaphore_cost``)."""
    return name.replace("-", "_")
