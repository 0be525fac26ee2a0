"""File distribution for the Python client: ``client.files``.

    group = client.chat.create("sender", ["w1", "w2", "w3"], "log shipping")
    client.files.upload("access.log.gz", group, sender="sender")
    client.files.finish(group, sender="sender")           # the book's ":done"

    # on each worker: the book's process_logs_from_redis, made real
    client.files.process(group, "w1", lambda file, line: count(line))

    for line in client.files.lines(file_id):              # str lines, gzip inflated
        print(line.offset, line)

A worker that loses its connection resumes each file right after the last line it
handled; a file is deleted from Redis once every worker marked it done. process()
names its worker in each download, so the server shows how far it has got
(list_files, the admin CLI, the web console); lines() and chunks() do with worker=.

The generated stubs of concord.files.v1 are the subpackage v1; gen_stubs.py only
creates this __init__.py when it is missing, never rewrites it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import grpc

from .._convert import when
from ..errors import ConcordError, FileNotFound, from_rpc_error
from .._listing import every_page
from .v1 import files_pb2 as pb

PIECE = 256 * 1024  # bytes per Upload message


class Line(str):
    """One line of a file (decoded as UTF-8, undecodable bytes kept as surrogates);
    ``offset`` is where the next line starts: pass it to lines() to resume."""

    offset: int
    data: bytes

    def __new__(cls, data: bytes, offset: int) -> Line:
        line = super().__new__(cls, data.decode("utf-8", "surrogateescape"))
        line.offset, line.data = offset, data
        return line


@dataclass(frozen=True)
class Uploaded:
    file_id: str
    size: int
    gzip: bool
    message_id: int


@dataclass(frozen=True)
class GroupSummary:
    """A file group as list_groups() shows it."""

    group: str
    files: int  # stored, uploads in progress included
    held_bytes: int
    bound_bytes: int  # uploads wait while the group's other files hold more (the server's --file-group-bound)


_LISTING = ("ListFileGroups", pb.ListFileGroupsRequest, "groups", "group",
            lambda m: GroupSummary(m.group, m.files, m.held_bytes, m.bound_bytes))


@dataclass(frozen=True)
class DownloadProgress:
    """How far a pending worker's download of a file has got, as the server last
    noted it (downloads that name their worker: lines(..., worker=...), process())."""

    worker: str
    offset: int  # the last one the server sent it
    lines: bool  # the offset is into the text (a gzip file's decompressed); else into the stored bytes
    updated_at: datetime


@dataclass(frozen=True)
class FileInfo:
    file_id: str
    name: str
    size: int
    state: str  # "uploading" or "complete"
    gzip: bool
    pending: list[str]
    downloads: list[DownloadProgress] = field(default_factory=list)  # of pending workers, by worker


@dataclass(frozen=True)
class Announced:
    """A file as its announcement in the group's chat describes it."""

    file_id: str
    name: str
    size: int


_STATES = {pb.FILE_STATE_UPLOADING: "uploading", pb.FILE_STATE_COMPLETE: "complete"}


def _pieces(source: str | os.PathLike | IO[bytes] | Iterable[bytes]) -> Iterator[bytes]:
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield from iter(lambda: f.read(PIECE), b"")
    elif hasattr(source, "read"):
        yield from iter(lambda: source.read(PIECE), b"")  # type: ignore[union-attr]
    else:
        yield from source  # type: ignore[misc]


class Files:
    """``client.files`` on a synchronous Client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._rpc = client._service("files")

    def _call(self, method: str, request: Any) -> Any:
        call = self._rpc.call_safe if method == "ListFiles" else self._rpc.call  # the one read (concord._retry)
        return call(method, request)

    def upload(self, source: str | os.PathLike | IO[bytes] | Iterable[bytes], group: str, *, sender: str,
               name: str | None = None) -> Uploaded:
        """Stores a file (a path, a binary file object, or an iterable of bytes) and
        announces it to the group's other members. Waits while the group holds too
        much (backpressure); if it fails midway nothing is announced or kept."""
        if name is None:
            name = Path(source).name if isinstance(source, (str, os.PathLike)) else "upload"
        header = pb.UploadRequest(header=pb.UploadHeader(group=group, sender=sender, name=name))
        try:
            r = self._rpc.open("Upload")(_requests(header, _pieces(source)))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return Uploaded(r.file_id, r.size, r.gzip, r.message_id)

    def chunks(self, file_id: str, from_offset: int = 0, *, worker: str | None = None) -> Iterator[tuple[bytes, int]]:
        """The stored bytes from an offset, as (data, offset just past it). With
        ``worker`` (one the file was sent to) the server notes how far it has got."""
        request = pb.DownloadRequest(file_id=file_id, from_offset=from_offset, worker=worker or "")
        for r in self._stream(request):
            yield r.data, r.offset

    def lines(self, file_id: str, from_offset: int = 0, *, worker: str | None = None) -> Iterator[Line]:
        """The file's lines (gzip inflated), following an upload still in progress. With
        ``worker`` (one the file was sent to) the server notes how far it has got."""
        request = pb.DownloadRequest(file_id=file_id, from_offset=from_offset, lines=True, worker=worker or "")
        for r in self._stream(request):
            for data, end in zip(r.lines, r.line_ends):
                yield Line(data, end)

    def _stream(self, request: pb.DownloadRequest) -> Iterator[pb.DownloadResponse]:
        try:
            yield from self._rpc.open("Download")(request)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    def mark_done(self, file_id: str, worker: str) -> bool:
        """Records that worker finished the file; True when that deleted it."""
        return self._call("MarkDone", pb.MarkDoneRequest(file_id=file_id, worker=worker)).deleted

    def list_files(self, group: str) -> tuple[list[FileInfo], int]:
        """The group's files (with how far their pending workers' downloads have got,
        where noted), and the bytes they hold in Redis."""
        r = self._call("ListFiles", pb.ListFilesRequest(group=group))
        return [FileInfo(f.file_id, f.name, f.size, _STATES.get(f.state, "unknown"), f.gzip, list(f.pending),
                         [DownloadProgress(d.worker, d.offset, d.lines, when(d.updated_at)) for d in f.downloads])
                for f in r.files], r.held_bytes

    def list_groups(self) -> list[GroupSummary]:
        """Every group that holds files, with the bytes held and the bound, by name
        (all pages of ListFileGroups)."""
        return every_page(self._rpc.call_safe, *_LISTING)

    def finish(self, group: str, *, sender: str) -> int:
        """Tells the group's workers that no more files will come."""
        return self._call("Finish", pb.FinishRequest(group=group, sender=sender)).message_id

    def process(self, group: str, worker: str, callback: Callable[[Announced, Line], None], *,
                retries: int = 5) -> int:
        """The worker loop: takes the group's file announcements from chat, calls
        callback(file, line) for every line of each file, marks the file done and
        acknowledges the announcement; returns, with the number of files processed,
        at the sender's closing marker. A broken download resumes after the last
        line handled (``retries`` times in a row at most)."""
        processed = 0
        with self.client.chat.subscribe(worker, ack_mode="explicit") as feed:
            for msg in feed:
                if not hasattr(msg, "body"):
                    continue  # a retention gap: nothing to process
                kind = _kind(msg.body)
                if kind and kind.get("type") == "file":
                    file = Announced(kind["file_id"], kind.get("name", ""), kind.get("size", 0))
                    if self._process_file(file, worker, callback, retries):
                        processed += 1
                self.client.chat.ack(worker, msg.chat_id, msg.message_id)
                if kind and kind.get("type") == "done":
                    return processed
        return processed

    def _process_file(self, file: Announced, worker: str, callback: Callable[[Announced, Line], None],
                      retries: int) -> bool:
        offset, failures = 0, 0
        while True:
            try:
                for line in self.lines(file.file_id, offset, worker=worker):
                    callback(file, line)
                    offset = line.offset
                    failures = 0
                break
            except FileNotFound:
                return False  # finished by everyone meanwhile, or its upload was undone
            except ConcordError as exc:
                failures += 1
                if failures > retries or not _retryable(exc):
                    raise
        try:
            self.mark_done(file.file_id, worker)
        except FileNotFound:
            pass  # our earlier MarkDone was the last and its reply got lost
        return True


def _requests(header: pb.UploadRequest, pieces: Iterator[bytes]) -> Iterator[pb.UploadRequest]:
    yield header
    for piece in pieces:
        for i in range(0, len(piece), PIECE):  # keeps every message under the gRPC limit
            yield pb.UploadRequest(data=piece[i:i + PIECE])


def _kind(body: str) -> dict | None:
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _retryable(exc: ConcordError) -> bool:
    return exc.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED,
                        grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
