"""`concord files`: list the groups; describe a group's files, what each worker has left
and how far its downloads have got."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ..files.v1 import files_pb2
from ._common import Base, Command, _dict, _table, _time


_FILE_STATES = {files_pb2.FILE_STATE_UPLOADING: "uploading", files_pb2.FILE_STATE_COMPLETE: "complete"}


def _read_text(file: Any, download: Any) -> str:
    """How much of the file a download has read: a share of its size, or for a gzip
    file read as lines the bytes of decompressed text (whose length is unknown)."""
    if download.lines and file.gzip:
        return f"{download.offset} bytes of text"
    return f"{100 * download.offset // file.size}%" if file.size else "100%"


def _workers_text(workers: Sequence[str], shown: int = 3) -> str:
    """A file's pending workers for a table: their names, or how many when many."""
    if not workers:
        return "-"
    return ", ".join(workers) if len(workers) <= shown else f"{len(workers)} workers"


class Commands(Base):
    def files_list(self, args: argparse.Namespace) -> None:
        found = self.entries("files", "ListFileGroups", files_pb2.ListFileGroupsRequest, "groups", "group")
        data = [{"group": g.group, "files": g.files, "held_bytes": g.held_bytes, "bound_bytes": g.bound_bytes}
                for g in found]
        self.emit(data, _table(data, ["group", "files", "held_bytes", "bound_bytes"]) if data else "(no file groups)")

    def files_describe(self, args: argparse.Namespace) -> None:
        """A group's files, the bytes they hold in Redis, and each worker's progress:
        the files it has not marked done yet and, for those it downloads naming itself,
        how far it has got (as the server last noted it)."""
        r = self.call("files", "ListFiles", files_pb2.ListFilesRequest(group=args.group))
        workers: dict[str, dict[str, Any]] = {}
        downloads: list[dict[str, Any]] = []

        def worker(w: str) -> dict[str, Any]:
            return workers.setdefault(w, {"worker": w, "pending_files": 0, "pending_bytes": 0, "downloads": []})

        for f in r.files:
            for w in f.pending:
                worker(w)["pending_files"] += 1
                worker(w)["pending_bytes"] += f.size
            for dl in f.downloads:
                seen = {"file_id": f.file_id, "name": f.name, "offset": dl.offset, "lines": dl.lines,
                        "size": f.size, "read": _read_text(f, dl), "updated_at": _time(dl, "updated_at")}
                worker(dl.worker)["downloads"].append(seen)
                downloads.append({"worker": dl.worker, **seen})
        d = {"group": args.group, "held_bytes": r.held_bytes, "bound_bytes": r.bound_bytes,
             "files": [_dict(f) for f in r.files],
             "workers": sorted(workers.values(), key=lambda w: w["worker"])}
        head = (f"group {args.group!r}: {len(r.files)} file(s), {r.held_bytes} bytes held "
                f"(uploads wait while the others hold more than {r.bound_bytes}, the server's --file-group-bound)")
        if not r.files:
            self.emit(d, f"group {args.group!r} holds no files")
            return
        rows = [{"file_id": f.file_id, "name": f.name, "size": f.size, "state": _FILE_STATES.get(f.state, ""),
                 "gzip": "yes" if f.gzip else "no", "pending": _workers_text(f.pending),
                 "created_at": _time(f, "created_at")}
                for f in r.files]
        text = head + "\n\n" + _table(rows, ["file_id", "name", "size", "state", "gzip", "pending", "created_at"])
        if workers:
            text += "\n\nworkers, by what they have not finished:\n" + _table(
                d["workers"], ["worker", "pending_files", "pending_bytes"])
        if downloads:
            text += "\n\ndownloads, as the server last noted them (workers that name themselves):\n" + _table(
                sorted(downloads, key=lambda x: (x["worker"], x["file_id"])),
                ["worker", "file_id", "name", "offset", "read", "updated_at"])
        self.emit(d, text)


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    files = kinds.add_parser("files", help="file distribution").add_subparsers(dest="action", required=True)
    command(files, "list", "files_list", "groups that hold files: files, bytes held, the bound")
    command(files, "describe", "files_describe",
            "a group's files (size, state, workers pending), the bytes they hold, each worker's pending files "
            "and how far its downloads have got"
            ).add_argument("group", help="the group: a chat")
