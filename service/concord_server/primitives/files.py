"""File distribution (the book's 6.6): a sender ships files to a group of workers
through Redis, in chunks, announced on a chat.

A group is a chat. All keys of the group's files share the group's hash tag, so the
bytes held for the group are counted in the same script that stores or deletes
them (lua/files_*.lua). An upload waits while the group's *other* files hold more
than the bound; it never waits on itself, so one file larger than the bound still
goes through, and Redis holds at most the bound plus the file being uploaded.

An upload is a file in state "uploading" with a lease its uploader renews with every
chunk; when the upload completes, the chat's members other than the sender become
its pending workers and the file is announced as a chat message. A cut upload is
deleted at once by its server; one whose server died is swept when its lease runs
out. Either way it was never announced.

Downloads follow an upload in progress on the group's (broadcast) doorbell, and turn
chunks into lines, gunzipping gzip files on the fly. A line offset is the position
just past the line in the (decompressed) text, so a worker that reconnects resumes
exactly after the last line it processed. A download that names its worker notes
how far it has got (files_note.lua: at its first response, then at most once a
second, and at its end) while that worker is pending on the file, for ListFiles and
the web console; the worker's MarkDone, or the file's deletion, takes the note away.

Imports no grpc: api/files.py maps its errors to status codes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from ..errors import (
    ConcordError,
    CorruptFile,
    FileNotComplete,
    FileNotFound,
    InvalidArgument,
    LineTooLong,
    NotAMember,
    NotAWorker,
    OffsetOutOfRange,
    Unavailable,
)
from ..keys import FileGroupKeys, KeySpace
from ..store.client import command
from ..store.reply_shapes import Codes, Either, INT, NIL, STR, Seq, Tup
from ..store.scripts import Commands, script
from ..statuses import DONE, UPLOAD
from ..wakeups.doorbells import Doorbells, Watch
from .chat import Chats
from .letting_go import Releaser
from .listing import noting, scan_summaries

log = logging.getLogger(__name__)

LISTED = "files"  # the listing index's kind (primitives/listing.py): the keys' tag

T = TypeVar("T")

# Each script's reply, by name: the shape is checked, then decoded here and only here.


class ReadReply(NamedTuple):
    state: str  # uploading | complete
    size: int
    chunk_size: int
    gzip: bool
    chunks: list[bytes]  # from the first index asked for, as many as are stored


def _read_reply(r: list[bytes]) -> ReadReply | None:
    """None: no such file."""
    if not r:
        return None
    return ReadReply(r[0].decode(), int(r[1]), int(r[2]), r[3] == b"1", r[4:])


class Download(NamedTuple):
    """How far a pending worker's download of a file has got (files_note.lua)."""

    worker: str
    offset: int  # the last response's
    lines: bool  # the offset is into the (decompressed) text; else into the stored bytes
    updated_ms: int  # when it was noted (Redis clock)


def _download(worker: str, entry: str) -> Download | None:
    """A download entry, "<offset> <lines 0/1> <ms>"; None for '' (none kept)."""
    if not entry:
        return None
    offset, lines, ms = entry.split(" ")
    return Download(worker, int(offset), lines == "1", int(ms))


class ListedFile(NamedTuple):
    n: str  # the file number
    name: str
    size: int
    state: str  # uploading | complete
    gzip: bool
    created_ms: int
    pending: list[str]  # its workers that have not marked it done
    downloads: list[Download]  # theirs that are noted


class ListReply(NamedTuple):
    held: int  # bytes the group's files hold
    files: list[ListedFile]  # oldest first


def _list_reply(r: list[Any]) -> ListReply:
    files, i = [], 1
    while i < len(r):
        n, name, size, state, gzip, created, count = r[i:i + 7]
        pairs = r[i + 7:i + 7 + 2 * int(count)]
        pending, entries = pairs[0::2], pairs[1::2]
        downloads = [d for w, e in zip(pending, entries) if (d := _download(w, e))]
        files.append(ListedFile(n, name, int(size), state, gzip == "1", int(created), pending, downloads))
        i += 7 + len(pairs)
    return ListReply(r[0], files)


_UPLOAD = script("files_upload.lua", Codes(*UPLOAD.codes()))
_DONE = script("files_done.lua", Codes(*DONE.codes()))
_READ = script("files_read.lua", Either(Tup(), Seq(STR, STR, STR, STR, each=(STR,))), raw=True,
               decode=_read_reply)
_LIST = script("files_list.lua", Seq(INT, each=(Either(STR, INT, NIL),)), decode=_list_reply)

_PROGRESS = script("files_progress.lua", Seq(INT, INT, each=(Either(STR, INT),)))
_NOTE = script("files_note.lua", Codes(0, 1))

SCRIPTS = (_UPLOAD, _DONE, _READ, _LIST, _PROGRESS, _NOTE)

READ_CHUNKS = 4  # chunks per read while downloading
SAFETY_WAIT = 1.0  # a follower re-reads at least this often (lost notifications)
INFLATE_STEP = 256 * 1024
NOTE_EVERY = 1.0  # seconds between two notes of one download's offset (the first response's at once)
NOTE_WAIT = 1.0  # seconds a note may hold its download up (Redis slow or away): it is only informational


@dataclass(frozen=True)
class Uploaded:
    file_id: str
    size: int
    gzip: bool
    message_id: int


@dataclass(frozen=True)
class FileInfo:
    file_id: str
    name: str
    size: int
    state: str  # uploading | complete
    gzip: bool
    pending: list[str]
    created_ms: int
    downloads: list[Download]  # of pending workers that named themselves, by worker


@dataclass(frozen=True)
class FileProgress:
    """One file and where its workers stand (files_progress.lua)."""

    file_id: str
    name: str
    sender: str
    size: int  # so far, while uploading
    state: str  # uploading | complete
    gzip: bool
    created_ms: int
    lease_until_ms: int  # an upload's lease (renewed with every chunk)
    pending: int  # workers that have not marked it done
    done: int  # workers that have
    workers: list[tuple[str, bool]]  # some of them by name (at most the asked number of each): (worker, done)
    downloads: list[Download]  # of those pending, the noted ones


@dataclass(frozen=True)
class GroupSummary:
    """One file group as a listing shows it."""

    group: str
    files: int  # stored, uploads in progress included
    held_bytes: int
    bound_bytes: int  # this server's group bound (--file-group-bound)


def file_id(group: str, n: int | str) -> str:
    return f"{n}:{group}"


def parse_file_id(fid: str) -> tuple[str, str]:
    """(group, file number); the number comes first, so any group name is fine."""
    n, sep, group = fid.partition(":")
    if not sep or not n.isdigit() or not group:
        raise InvalidArgument(f"file_id {fid!r} is not one this server issued", field="file_id")
    return group, n


def announcement(fid: str, name: str, size: int) -> str:
    """The chat message that tells the group's workers about a file."""
    return json.dumps({"type": "file", "file_id": fid, "name": name, "size": size})


DONE_MESSAGE = json.dumps({"type": "done"})


class Files:
    def __init__(self, redis: Commands, keyspace: KeySpace, doorbells: Doorbells, chats: Chats, *,
                 chunk_size: int = 256 * 1024, group_bound: int = 64 * 1024 * 1024, upload_lease_ms: int = 30_000,
                 max_line: int = 1024 * 1024) -> None:
        self._redis = redis
        self._keys = keyspace
        self._bells = doorbells
        self._chats = chats
        self.chunk_size = chunk_size
        self._bound = group_bound
        self._lease_ms = upload_lease_ms
        self._max_line = max_line
        self._releaser = Releaser()

    def _run(self, s, k: FileGroupKeys, *args: object):
        return s.run(self._redis, k.keys, [k.channel, k.prefix, *args])

    # -- upload ------------------------------------------------------------------

    async def upload(self, group: str, sender: str, name: str, data: AsyncIterator[bytes]) -> Uploaded:
        """Stores the stream's bytes and announces the file; a failure or a cut
        stream deletes what was stored, and nothing is announced."""
        members = await self._chats.members(group)
        if sender not in members:
            raise NotAMember(f"{sender!r} is not a member of group {group!r}", chat_id=group, user=sender)
        workers = [m for m in members if m != sender]
        if not workers:
            raise InvalidArgument(f"group {group!r} has no members besides the sender", field="group")
        k = self._keys.file_group(group)
        n = await command(self._redis, "INCR", self._keys.file_ids)
        fid = file_id(group, n)
        try:
            # Inside the try: a call cancelled while "begin" is in flight still has
            # its file created in Redis, and must delete it.
            await noting(self._run(_UPLOAD, k, "begin", n, name, sender, self.chunk_size, self._lease_ms),
                         self._redis, self._keys, LISTED, [group])  # it holds a file now: listed
            size, first = 0, b""
            pending = bytearray()
            async with self._bells.watch([k.channel]) as freed:
                async for piece in data:
                    pending += piece
                    while len(pending) >= self.chunk_size:
                        chunk = bytes(pending[: self.chunk_size])
                        del pending[: self.chunk_size]
                        first = first or chunk
                        size += await self._append(k, n, chunk, freed)
                if pending:
                    first = first or bytes(pending)
                    size += await self._append(k, n, bytes(pending), freed)
            if await self._run(_UPLOAD, k, "complete", n, *workers) != UPLOAD.STORED:
                raise Unavailable(f"upload of {name!r} took too long between chunks and was dropped")
            message_id, _ = await self._chats.send(group, sender, announcement(fid, name, size))
            return Uploaded(fid, size, first[:2] == b"\x1f\x8b", message_id)
        except BaseException:
            self._releaser.let_go(lambda: self._run(_UPLOAD, k, "abort", n), self._lease_ms, fid)
            raise

    async def _append(self, k: FileGroupKeys, n: int, chunk: bytes, freed: Watch) -> int:
        """Stores one chunk, waiting while the group's other files hold too much."""
        while True:
            freed.arm()
            stored = await self._run(_UPLOAD, k, "append", n, chunk, self._bound, self._lease_ms)
            if stored == UPLOAD.STORED:
                return len(chunk)
            if stored == UPLOAD.DROPPED:
                raise Unavailable("the upload was dropped: its lease ran out between chunks")
            # Over the bound: wait for a file to be freed, renewing the lease meanwhile.
            await freed.wait(self._lease_ms / 3000)

    # -- download ----------------------------------------------------------------

    async def _read(self, k: FileGroupKeys, n: str, first: int, count: int, fid: str) -> ReadReply:
        """The file's state and up to count chunks from index first. ``fid`` names the
        file to the client when it is gone (never a Redis key)."""
        reply = await self._run(_READ, k, n, first, count)
        if reply is None:
            raise FileNotFound(f"file {fid!r} does not exist (or every worker finished it)", file_id=fid)
        return reply

    async def chunks(self, fid: str, offset: int, worker: str = "") -> AsyncIterator[tuple[bytes, int]]:
        """The stored bytes from offset, as (data, offset just past it), following an
        upload in progress until it completes; a named worker's offset is noted."""
        group, n = parse_file_id(fid)
        k = self._keys.file_group(group)
        pieces = self._follow(k, n, offset, await self._read(k, n, 0, 0, fid), fid)
        async for piece in self._noting(k, n, worker, False, pieces, lambda piece: piece[1]):
            yield piece

    async def _follow(self, k: FileGroupKeys, n: str, offset: int, meta: ReadReply, fid: str
                      ) -> AsyncIterator[tuple[bytes, int]]:
        """chunks(), given the file's state as read before (no second read to start)."""
        chunk_size = meta.chunk_size
        if offset > meta.size and meta.state == "complete":
            raise OffsetOutOfRange(f"offset {offset} is past the end of the file ({meta.size} bytes)",
                                   field="from_offset")
        async with self._bells.watch([k.channel]) as watch:
            while True:
                watch.arm()
                index = offset // chunk_size
                r = await self._read(k, n, index, READ_CHUNKS, fid)
                state, size, chunks = r.state, r.size, r.chunks
                for chunk in chunks:
                    start = offset - index * chunk_size
                    if start < len(chunk):
                        offset = index * chunk_size + len(chunk)
                        yield chunk[start:], offset
                    index += 1
                if state == "complete" and offset >= size:
                    return
                if not chunks:
                    await watch.wait(SAFETY_WAIT)  # the uploader is behind: wait for its next chunk

    async def lines(self, fid: str, offset: int, worker: str = "") -> AsyncIterator[list[tuple[bytes, int]]]:
        """Whole lines (without the line break) from a line offset, gzip files
        decompressed, each with the offset just past it; in batches, one per piece of
        text (about a chunk), so a line never waits for lines that have not arrived. A
        named worker's offset (its last batch's last line's) is noted."""
        group, n = parse_file_id(fid)
        k = self._keys.file_group(group)
        batches = self._batches(k, n, offset, await self._read(k, n, 0, 0, fid), fid)
        async for batch in self._noting(k, n, worker, True, batches, lambda batch: batch[-1][1]):
            yield batch

    async def _batches(self, k: FileGroupKeys, n: str, offset: int, meta: ReadReply, fid: str
                       ) -> AsyncIterator[list[tuple[bytes, int]]]:
        """lines(), given the file's state as read before."""
        if not meta.gzip:  # plain text
            async for batch in _split_lines(self._follow(k, n, offset, meta, fid), offset, self._max_line):
                yield batch
            return
        # A gzip stream cannot be entered midway: inflate from the start, skip to offset.
        async for batch in _split_lines(_gunzip(self._follow(k, n, 0, meta, fid)), 0, self._max_line):
            batch = [(line, end) for line, end in batch if end > offset]
            if batch:
                yield batch

    async def _noting(self, k: FileGroupKeys, n: str, worker: str, lines: bool, responses: AsyncIterator[T],
                      offset_of: Callable[[T], int]) -> AsyncIterator[T]:
        """responses, unchanged; with a worker named, how far they have got is noted
        (_Notes), the last time when they end, however they end."""
        if not worker:
            async for response in responses:
                yield response
            return
        notes = _Notes(lambda offset: self._run(_NOTE, k, n, worker, offset, int(lines)))
        try:
            async for response in responses:
                notes.offset = offset_of(response)
                yield response
                await notes.due()
        finally:
            await notes.ended()

    async def mark_done(self, fid: str, worker: str) -> bool:
        """True when this was the last worker and the file was deleted."""
        group, n = parse_file_id(fid)
        result = await self._run(_DONE, self._keys.file_group(group), n, worker)
        if result == DONE.NO_SUCH_FILE:
            raise FileNotFound(f"file {fid!r} does not exist (or every worker finished it)", file_id=fid)
        if result == DONE.NOT_COMPLETE:
            raise FileNotComplete(f"file {fid!r} is still being uploaded", file_id=fid)
        if result == DONE.NOT_A_WORKER:
            raise NotAWorker(f"{worker!r} is not one of the workers file {fid!r} was sent to", file_id=fid)
        return result == DONE.DELETED

    @property
    def bound(self) -> int:
        """Bytes a group's other files may hold before an upload waits."""
        return self._bound

    async def summaries(self, page_token: str, count: int) -> tuple[list[GroupSummary], str]:
        """A page of the groups that hold files, each read by a ZCARD and a GET
        (listing.scan_summaries)."""
        return await scan_summaries(self._redis, self._keys, LISTED, page_token, count, self._summary)

    async def _summary(self, group: str) -> GroupSummary | None:
        k = self._keys.file_group(group)
        files, held = await asyncio.gather(command(self._redis, "ZCARD", k.files), command(self._redis, "GET", k.held))
        if not files:
            return None  # its last file went since the listing found it live
        return GroupSummary(group, files, int(held or 0), self._bound)

    async def list(self, group: str) -> tuple[list[FileInfo], int]:
        """The group's files and the bytes they hold."""
        reply = await self._run(_LIST, self._keys.file_group(group))
        return [FileInfo(file_id(group, f.n), f.name, f.size, f.state, f.gzip, sorted(f.pending), f.created_ms,
                         sorted(f.downloads)) for f in reply.files], reply.held

    async def progress(self, group: str, files: int, workers: int) -> tuple[int, int, list[FileProgress]]:
        """(files in the group, bytes held, its oldest ``files`` files with up to
        ``workers`` pending and as many done workers each, and how far the downloads of
        those pending have got where noted): one bounded script that writes nothing;
        the web console's read."""
        r = await self._run(_PROGRESS, self._keys.file_group(group), files, workers)
        found, i = [], 2
        while i < len(r):
            n, name, sender, size, state, gz, created, lease, pending, done, k = r[i:i + 11]
            triples = r[i + 11:i + 11 + 3 * k]
            names, done_flags, entries = triples[0::3], triples[1::3], triples[2::3]
            found.append(FileProgress(file_id(group, n), name, sender, size, state, gz == 1, created, lease,
                                      pending, done, [(w, d == 1) for w, d in zip(names, done_flags)],
                                      [d for w, e in zip(names, entries) if (d := _download(w, e))]))
            i += 11 + 3 * k
        return r[0], r[1], found

    async def finish(self, group: str, sender: str) -> int:
        """Sends the group the closing marker; returns its message id."""
        message_id, _ = await self._chats.send(group, sender, DONE_MESSAGE)
        return message_id

    async def drain(self, timeout: float) -> None:
        await self._releaser.drain(timeout)


class _Notes:
    """Where one download of a named worker has got, noted in Redis (files_note.lua)
    at its first response, then at most every NOTE_EVERY seconds, and at its end. Best
    effort: a note that fails, or takes longer than NOTE_WAIT, is skipped (logged at
    debug), never the download's failure."""

    def __init__(self, note: Callable[[int], Awaitable[int]]) -> None:
        self._note = note  # 1: kept; 0: not (the worker is not pending on the file, not yet or no more)
        self.offset: int | None = None  # the last response's, once handed to gRPC
        self._noted: int | None = None  # the last offset kept
        self._noted_at = -math.inf  # event loop time: only spaces the notes out (Redis's clock dates them)

    async def due(self) -> None:
        """Notes the offset if none was noted in the last NOTE_EVERY seconds."""
        now = asyncio.get_running_loop().time()
        if now - self._noted_at >= NOTE_EVERY:
            self._noted_at = now
            await self._write()

    async def ended(self) -> None:
        """The download ended: its last offset, unless that one is kept already."""
        if self.offset is not None and self.offset != self._noted:
            await self._write()

    async def _write(self) -> None:
        offset = self.offset
        try:
            async with asyncio.timeout(NOTE_WAIT):
                kept = await self._note(offset)
        except (ConcordError, TimeoutError) as exc:
            log.debug("a download's offset %s was not noted: %r", offset, exc)
            return
        if kept:  # else the end tries again: a download that follows an upload is pending from its completion on
            self._noted = offset


async def _gunzip(chunks: AsyncIterator[tuple[bytes, int]]) -> AsyncIterator[tuple[bytes, int]]:
    """Decompressed text as (data, decompressed offset just past it). Concatenated
    gzip members are read one after another, as gzip(1) does; output comes in
    pieces of at most INFLATE_STEP bytes, so a small file cannot inflate into a
    huge buffer."""
    inflater, fed, total = zlib.decompressobj(wbits=31), False, 0
    try:
        async for data, _ in chunks:
            while data:
                fed = True
                out = inflater.decompress(data, INFLATE_STEP)
                data = inflater.unconsumed_tail
                if out:
                    total += len(out)
                    yield out, total
                if inflater.eof:
                    data, inflater, fed = inflater.unused_data, zlib.decompressobj(wbits=31), False
    except zlib.error as exc:
        raise CorruptFile(f"the gzip data does not decompress: {exc}") from exc
    if fed and not inflater.eof:
        raise CorruptFile("the gzip data ends before its end marker")


async def _split_lines(text: AsyncIterator[tuple[bytes, int]], start: int, max_line: int
                       ) -> AsyncIterator[list[tuple[bytes, int]]]:
    """The lines of text that begins at offset start, as one batch per piece of text;
    a last line without a break counts."""
    buffer = bytearray()
    position = start  # offset of buffer[0]
    async for data, _ in text:
        buffer += data
        batch = []
        begin = 0
        while (i := buffer.find(b"\n", begin)) >= 0:
            batch.append((bytes(buffer[begin:i]).removesuffix(b"\r"), position + i + 1))
            begin = i + 1
        del buffer[:begin]
        position += begin
        if batch:
            yield batch
        if len(buffer) > max_line:
            raise LineTooLong(f"a line at offset {position} is longer than {max_line} bytes")
    if buffer:
        yield [(bytes(buffer), position + len(buffer))]
