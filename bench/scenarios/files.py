"""Files: upload and download MB/s through gRPC against the same bytes written and
read straight with redis-py, and peak Redis memory against the configured bound.

One concord-server, started with --file-chunk-size CHUNK and --file-group-bound
BOUND, on a fresh Valkey. A group is a chat (client.chat.create).

Throughput, every repetition, for two files: a plain log (LOG_MB MiB of generated
access-log lines, seeded) and its gzip. Each is uploaded to a group of its own (the
sender and one worker), so the bound never holds it back:

  upload      client.files.upload of the file (the client sends it in 256 KiB
              messages) until the UploadResponse: MB/s of stored bytes
  raw         Download (lines false) through the sync generated stub, drained:
              MB/s of stored bytes
  lines       Download (lines true): the lines of about a chunk of text per message,
              gzip inflated by the server; timed over the first LINES_MB MiB of text,
              then cancelled: MB/s of text (decompressed bytes) and lines/s
  baseline    the same bytes through sync redis-py on the same Valkey: SET as one
              string, then GET; the note adds HSET / HGET chunk by chunk (CHUNK bytes,
              one command each), the layout Concord stores
MB/s is 10^6 bytes/s. The worker marks the file done after, which deletes it.

Peak memory, min(--reps, 3) runs: PEAK_FILES files of PEAK_MB MiB (lines of about 4
KiB) uploaded one after another to a group of the sender and two workers, each a
thread running the client's worker loop (client.files.process), which sleeps
WORKER_DELAY s after a file's last line before MarkDone. A thread samples INFO
memory used_memory and the group's held-bytes counter every SAMPLE_GAP s. Reported:
the peak used_memory minus the value before the first upload, against the documented
limit, the bound plus the largest file (an upload waits while the group's other
files hold more than the bound, never on its own bytes).
"""

from __future__ import annotations

import gzip
import io
import random
import threading
import time
from collections.abc import Callable

import psutil
import redis

import concord
from concord.files.v1 import files_pb2 as pb
from concord.files.v1 import files_pb2_grpc
from concord_server.config import Settings
from concord_server.keys import KeySpace

from ..harness import concord_server, median, redis_server
from ..report import Row, fmt
from . import Context
from .autocomplete import used_memory
from .handoff import Probe
from .queue_cost import _sequential, medians

SC = "files"
MiB = 2**20
CHUNK = 256 * 1024
SAMPLE_GAP = 0.02
WORKER_DELAY = 0.5
MIN_CPU_WINDOW = 0.2  # psutil's CPU times tick every 10 ms: no busy figures for shorter transfers
KINDS = {"plain": "plain log", "gzip": "gzip of it"}


def log_text(size: int, seed: int = 1) -> bytes:
    """About size bytes of access-log lines, the same for the same seed."""
    rng = random.Random(seed)
    paths = [f"/api/v1/{r}/{{}}" for r in ("items", "users", "orders", "search?q=", "carts")] + ["/static/app.js"]
    agents = ['"Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0"', '"curl/8.5.0"', '"Go-http-client/2.0"']
    lines, n = [], 0
    while n < size:
        line = (f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)} - - "
                f"[12/Mar/2024:{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d} +0000] "
                f'"{rng.choice(("GET", "GET", "POST"))} {rng.choice(paths).format(rng.randrange(10**6))} HTTP/1.1" '
                f"{rng.choice((200, 200, 200, 304, 404, 500))} {rng.randrange(10**5)} \"-\" {rng.choice(agents)}\n")
        lines.append(line)
        n += len(line)
    return "".join(lines).encode()


def long_lines(text: bytes, width: int = 4096) -> bytes:
    """The text cut into lines of width bytes (the last shorter)."""
    flat = text.replace(b"\n", b" ")
    return b"\n".join(flat[i:i + width - 1] for i in range(0, len(flat), width - 1)) + b"\n"


def _download(stub: files_pb2_grpc.FileServiceStub, fid: str, lines: bool, stop_at: int) -> tuple[int, int, bytes]:
    """Download until the offset reaches stop_at (then cancelled) or the stream ends:
    (last offset, chunks or lines received, the last chunk or line)."""
    call = stub.Download(pb.DownloadRequest(file_id=fid, lines=lines), timeout=600)
    offset, messages, data = 0, 0, b""
    for r in call:
        offset = r.offset
        if lines:  # many lines a message
            data = r.lines[-1] if r.lines else data
            messages += len(r.lines)
        else:
            data = r.data
            messages += 1
        if offset >= stop_at:
            call.cancel()
            break
    return offset, messages, data


def _throughput(client: concord.Client, conn: redis.Redis, procs: dict[str, psutil.Process], text: bytes,
                stored: bytes, lines_upto: int, tag: str) -> dict:
    """One repetition for one file: upload, raw and line downloads, the redis-py
    baseline; MB/s and how busy the server, Redis and the bench were."""
    stub = files_pb2_grpc.FileServiceStub(client._channel)
    group = client.chat.create(f"{tag}-s", [f"{tag}-w"], "throughput")
    out: dict = {}

    def timed(name: str, size: int, call: Callable[[], object]):
        result = []
        r = _sequential(1, lambda _: result.append(call()), procs)
        out[name] = {**r, "mb_per_s": size / r["wall_s"] / 1e6}
        return result[0]

    up = timed("upload", len(stored), lambda: client.files.upload(io.BytesIO(stored), group, sender=f"{tag}-s",
                                                                  name=tag))
    raw = timed("raw", len(stored), lambda: _download(stub, up.file_id, False, len(stored)))
    if raw[0] != len(stored) or up.size != len(stored):
        raise RuntimeError(f"{tag}: stored {up.size} and downloaded {raw[0]} of {len(stored)} bytes")
    end, n_lines, last = timed("lines", lines_upto, lambda: _download(stub, up.file_id, True, lines_upto))
    if end < lines_upto or text[end - len(last) - 1:end - 1] != last:
        raise RuntimeError(f"{tag}: the line ending at offset {end} is not the file's")
    out["lines"] |= {"mb_per_s": end / out["lines"]["wall_s"] / 1e6, "lines": n_lines,
                     "lines_per_s": n_lines / out["lines"]["wall_s"]}
    client.files.mark_done(up.file_id, f"{tag}-w")
    key = f"bench:files:{tag}"
    timed("set", len(stored), lambda: conn.set(key, stored))
    got = timed("get", len(stored), lambda: conn.get(key))
    chunks = range(0, len(stored), CHUNK)
    timed("hset", len(stored), lambda: [conn.hset(key + ":h", str(i), stored[i:i + CHUNK]) for i in chunks])
    back = timed("hget", len(stored), lambda: b"".join(conn.hget(key + ":h", str(i)) for i in chunks))
    if got != stored or back != stored:
        raise RuntimeError(f"{tag}: redis-py read back other bytes")
    conn.delete(key, key + ":h")
    return out


class MemorySampler(Probe):
    """handoff.Probe's background thread, sampling instead of probing: every
    SAMPLE_GAP s, Redis's used_memory and a group's held-bytes counter."""

    def __init__(self, conn: redis.Redis, held_key: str) -> None:
        super().__init__("")
        self.conn, self.held_key = conn, held_key
        self.samples: list[tuple[float, int, int]] = []  # (time, used_memory, held bytes)

    def _run(self) -> None:
        while True:
            pipe = self.conn.pipeline(False)
            pipe.info("memory")
            pipe.get(self.held_key)
            info, held = pipe.execute()
            self.samples.append((time.monotonic(), info["used_memory"], int(held or 0)))
            if self._stop.wait(SAMPLE_GAP):
                return


def _peak(target: str, conn: redis.Redis, files: list[bytes], bound: int, tag: str) -> dict:
    """One peak-memory run (see the module doc)."""
    sender, workers = f"{tag}-s", [f"{tag}-w1", f"{tag}-w2"]
    processed: dict[str, int] = {}

    def worker(name: str) -> None:
        def on_line(file: concord.files.Announced, line: concord.files.Line) -> None:
            if line.offset >= file.size:  # its last line: hold the file a while before MarkDone
                time.sleep(WORKER_DELAY)

        with concord.Client(target) as c:
            processed[name] = c.files.process(group, name, on_line)

    with concord.Client(target) as client:
        group = client.chat.create(sender, workers, "peak memory")
        threads = [threading.Thread(target=worker, args=(w,), name=w) for w in workers]
        before = used_memory(conn)
        uploads = []
        with MemorySampler(conn, KeySpace(Settings().key_prefix).file_group(group).held) as sampler:
            for t in threads:
                t.start()
            for i, data in enumerate(files):
                t0 = time.monotonic()
                client.files.upload(io.BytesIO(data), group, sender=sender, name=f"part{i}")
                uploads.append(time.monotonic() - t0)
            client.files.finish(group, sender=sender)
            for t in threads:
                t.join(120)
            time.sleep(3 * SAMPLE_GAP)
    if processed != dict.fromkeys(workers, len(files)):
        raise RuntimeError(f"the workers processed {processed} files, not {len(files)} each")
    samples = sampler.samples
    return {"before_b": before, "peak_b": max(s[1] for s in samples) - before,
            "peak_held_b": max(s[2] for s in samples), "after_b": samples[-1][1] - before, "samples": len(samples),
            "upload_s": uploads, "wall_s": samples[-1][0] - samples[0][0], "limit_b": bound + max(map(len, files))}


def run(ctx: Context) -> tuple[list[Row], dict]:
    log_mb, lines_mb, bound, peak_files, peak_mb = (16, 1, 12 * MiB, 4, 8) if ctx.quick else (64, 4, 24 * MiB, 5, 16)
    text = log_text(log_mb * MiB)
    stored = {"plain": text, "gzip": gzip.compress(text, compresslevel=6)}
    peak_data = [long_lines(log_text(peak_mb * MiB, seed=10 + i))[:peak_mb * MiB] for i in range(peak_files)]
    args = ["--file-chunk-size", str(CHUNK), "--file-group-bound", str(bound)]
    runs: dict[str, list[dict]] = {"plain": [], "gzip": [], "peak": []}
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC),
                                                        extra_args=args) as srv, \
            rds.client() as conn, concord.Client(srv.target) as client:
        procs = {"server": srv.ps, "redis": psutil.Process(rds.proc.pid)}
        _throughput(client, conn, procs, text, stored["gzip"], MiB, "warm-up")
        for rep in range(ctx.reps):
            for kind in ("plain", "gzip"):
                runs[kind].append(_throughput(client, conn, procs, text, stored[kind], lines_mb * MiB, f"{kind}{rep}"))
        for rep in range(min(ctx.reps, 3)):
            runs["peak"].append(_peak(srv.target, conn, peak_data, bound, f"peak{rep}"))
    details = {"chunk": CHUNK, "bound": bound, "sizes": {k: len(v) for k, v in stored.items()},
               "text_lines": text.count(b"\n"), "lines_timed_mb": lines_mb, "peak_files": peak_files,
               "peak_file_b": len(peak_data[0]), "worker_delay_s": WORKER_DELAY, "reps": ctx.reps, "runs": runs}
    return _rows(details), details


def _rows(d: dict) -> list[Row]:
    runs, sizes = d["runs"], d["sizes"]

    def m(kind: str, step: str, key: str = "mb_per_s") -> tuple[float, list[float]]:
        return medians([r[step] for r in runs[kind]], key)

    def busy(kind: str, step: str) -> str:
        wall = m(kind, step, "wall_s")[0]
        if wall < MIN_CPU_WINDOW:
            return f"{fmt(wall, 's')} a transfer, too short for CPU figures"
        return (f"{fmt(wall, 's')} a transfer; server {m(kind, step, 'server_busy')[0]:.0%}, Redis "
                f"{m(kind, step, 'redis_busy')[0]:.0%}, bench client {m(kind, step, 'bench_busy')[0]:.0%} of a core")

    plain = f"{fmt(sizes['plain'], 'B')} of log lines"
    (set_mb, set_runs), (get_mb, get_runs) = m("plain", "set"), m("plain", "get")
    rows = [
        Row(SC, f"baseline: redis-py SET of the {plain} as one string, MB/s", set_mb, "", runs=set_runs,
            note=f"HSET chunk by chunk ({d['chunk'] // 1024} KiB, one command each): {m('plain', 'hset')[0]:.0f} MB/s"),
        Row(SC, "baseline: redis-py GET of it, MB/s", get_mb, "", runs=get_runs,
            note=f"HGET chunk by chunk: {m('plain', 'hget')[0]:.0f} MB/s"),
    ]
    for kind, what in KINDS.items():
        size = f"{what}, {fmt(sizes[kind], 'B')} stored"
        if kind == "gzip":
            size += f", {fmt(sizes['plain'], 'B')} of text"
        put, get = {"baseline": m(kind, "set")[0], "baseline_label": "redis-py SET"}, \
            {"baseline": m(kind, "get")[0], "baseline_label": "redis-py GET"}
        (up, up_runs), (raw, raw_runs), (lines, lines_runs) = (m(kind, step) for step in ("upload", "raw", "lines"))
        rows += [
            Row(SC, f"Concord Upload ({size}), MB/s", up, "", runs=up_runs, note=busy(kind, "upload"), **put),
            Row(SC, f"Concord Download raw chunks ({what}), MB/s", raw, "", runs=raw_runs, note=busy(kind, "raw"),
                **get),
            Row(SC, f"Concord Download lines=true ({what}), MB/s of text", lines, "", runs=lines_runs,
                note=f"{m(kind, 'lines', 'lines_per_s')[0]:,.0f} lines/s, many a message, over the first "
                     f"{d['lines_timed_mb']} MiB of text; {busy(kind, 'lines')}", **get),
        ]
    peak = runs["peak"]
    value, values = medians(peak, "peak_b")
    limit = peak[0]["limit_b"]
    waited = median([sum(r["upload_s"]) for r in peak])
    rows.append(Row(
        SC, f"peak Redis used_memory - before, {d['peak_files']} uploads of {fmt(d['peak_file_b'], 'B')}, "
            f"bound {fmt(d['bound'], 'B')}, 2 slow workers", value, "B", runs=values,
        target=f"≤ bound + largest file = {fmt(limit, 'B')}", passed=max(values) <= limit,
        note=f"peak held (the group's byte counter) {fmt(median([r['peak_held_b'] for r in peak]), 'B')}; "
             f"uploads took {waited:.1f} s in all (waiting on the bound); worst run {fmt(max(values), 'B')}; "
             f"{median([r['samples'] for r in peak]):.0f} samples"))
    return rows
