"""The files page: the tenant's file groups, the bytes each holds against the bound
(--file-group-bound: an upload waits while the group's other files hold more), its
files and each worker's progress, read through the files primitive (app.py's, in
the viewer's tenant): the first MAX_GROUPS groups by name of the tenant's listing
index (ListFileGroups'), each read by one bounded script that writes nothing
(files_progress.lua): its oldest MAX_FILES files (name, sender, size, uploading or
complete, workers pending and done) with up to WORKERS_PER_FILE pending and as many
done workers of each by name.

A worker's progress is the files it has marked done (MarkDone) of those sent to it
and, for a file it has not, how far its download has got when it named itself in
the Download (DownloadRequest.worker: the offset of the last response the server
sent it, noted at the first, at most once a second after, and at the stream's end);
an upload's is its size so far.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .capped import AT_ONCE, first_summaries

MAX_GROUPS = 20  # file groups one view lists
MAX_FILES = 20  # files shown per group, oldest first (with the count)
WORKERS_PER_FILE = 20  # workers read per file and state (pending, done), by name
MAX_WORKERS = 50  # workers shown per group, by name
DOWNLOADS_PER_WORKER = 5  # a worker's downloads shown, the latest noted first


async def file_groups_view(files: Any) -> dict[str, Any]:
    found, more = await first_summaries(files.summaries, MAX_GROUPS, lambda s: s.group)
    gate = asyncio.Semaphore(AT_ONCE)

    async def row(summary: Any) -> dict[str, Any]:
        async with gate:
            count, held, listed = await files.progress(summary.group, MAX_FILES, WORKERS_PER_FILE)
        workers: dict[str, dict[str, Any]] = {}
        sampled = False
        for f in listed:
            sampled = sampled or len(f.workers) < f.pending + f.done
            for worker, done in f.workers:
                w = workers.setdefault(worker, {"worker": worker, "done": 0, "pending": 0, "pending_files": [],
                                                "downloads": []})
                if done:
                    w["done"] += 1
                else:
                    w["pending"] += 1
                    if len(w["pending_files"]) < 5:
                        w["pending_files"].append(f.name)
            for d in f.downloads:
                workers[d.worker]["downloads"].append(_download(f, d))
        shown = [_latest_downloads(workers[w]) for w in sorted(workers)[:MAX_WORKERS]]
        return {"name": summary.group, "files": count, "held_bytes": held, "bound_bytes": summary.bound_bytes,
                "file_list": [{"file_id": f.file_id, "name": f.name, "sender": f.sender, "size": f.size,
                               "state": f.state, "gzip": f.gzip, "created_ms": f.created_ms,
                               "pending": f.pending, "done": f.done} for f in listed],
                "workers": shown, "workers_more": len(workers) > MAX_WORKERS, "workers_sampled": sampled}

    rows = list(await asyncio.gather(*(row(s) for s in found)))
    rows.sort(key=lambda r: (-r["held_bytes"] / max(r["bound_bytes"], 1), r["name"]))
    return {"items": rows, "more": more, "limit": MAX_GROUPS, "files_limit": MAX_FILES,
            "workers_limit": MAX_WORKERS}


def _download(f: Any, d: Any) -> dict[str, Any]:
    """One download of a worker's row: with lines of a gzip file the offset is into the
    decompressed text, which has no known length; else it is out of the file's size."""
    return {"file_id": f.file_id, "file": f.name, "size": f.size, "gzip": f.gzip, "offset": d.offset,
            "lines": d.lines, "updated_ms": d.updated_ms}


def _latest_downloads(w: dict[str, Any]) -> dict[str, Any]:
    w["downloads"] = sorted(w["downloads"], key=lambda d: -d["updated_ms"])[:DOWNLOADS_PER_WORKER]
    return w
