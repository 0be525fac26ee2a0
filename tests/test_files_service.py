"""FileService end to end: a server with small chunks and a small memory bound, three
workers, plain and gzip files larger than the bound, resumed downloads, faults, and
how far a named worker's download has got."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone

import grpc
import pytest

import concord
from concord.files.v1 import files_pb2 as pb
from concord.files.v1 import files_pb2_grpc
from concord_server.keys import KeySpace
from concord_server.primitives import files as files_primitive
from support import ServerProcess, error_info, wait_until

CHUNK, BOUND = 1024, 8 * 1024

SLOW_SENDER = """
import sys, time, concord
client = concord.Client(sys.argv[1])
def pieces():
    yield b"x" * 5000
    print("sent", flush=True)
    time.sleep(60)
    yield b"never"
client.files.upload(pieces(), sys.argv[2], sender=sys.argv[3], name="doomed.log")
"""


@pytest.fixture(scope="module")
def file_server(redis_server, tmp_path_factory):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "files", "--file-chunk-size", str(CHUNK),
                      "--file-group-bound", str(BOUND))
    s.start(tmp_path_factory.mktemp("files") / "server.log")
    yield s
    s.stop()


@pytest.fixture
def fclient(file_server):
    with concord.Client(file_server.target) as c:
        yield c


def text(tag: str, lines: int) -> bytes:
    return b"".join(b"%s line %05d with some padding to make it longer\n" % (tag.encode(), i) for i in range(lines))


def group_keys(redis_sync, group: str) -> list[str]:
    return [k for k in redis_sync.keys("*") if k.startswith(f"{{files:files:{group}}}")]


def test_three_workers_each_process_every_line_once_and_redis_ends_empty(fclient, redis_sync, name):
    sender, workers = f"{name}:s", [f"{name}:w{i}" for i in range(3)]
    group = fclient.chat.create(sender, workers, "log shipping")
    files = {"plain.log": text("p", 800), "zipped.log.gz": gzip.compress(text("z", 900)),
             "tail-no-newline.log": text("t", 300) + b"last line without a break"}
    assert all(len(data) > BOUND for name_, data in files.items() if not name_.endswith(".gz")) and \
        len(gzip.decompress(files["zipped.log.gz"])) > BOUND
    seen: dict[str, list[tuple[str, str]]] = {w: [] for w in workers}
    peak = [0]

    def work(worker: str) -> None:
        fclient.files.process(group, worker, lambda f, line: seen[worker].append((f.name, str(line))))

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for file_name, data in files.items():
        up = fclient.files.upload(io.BytesIO(data), group, sender=sender, name=file_name)
        assert up.gzip == file_name.endswith(".gz") and up.size == len(data)
        peak[0] = max(peak[0], fclient.files.list_files(group)[1])
    fclient.files.finish(group, sender=sender)
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    expected = [(n, line.decode()) for n, data in files.items()
                for line in (gzip.decompress(data) if n.endswith(".gz") else data).split(b"\n") if line]
    for w in workers:
        assert seen[w] == expected, f"{w} did not process every line exactly once, in order"
    # The bound holds across files: never more than the bound plus the largest file.
    assert peak[0] <= BOUND + max(len(d) for d in files.values())
    assert fclient.files.list_files(group) == ([], 0)
    assert group_keys(redis_sync, group) == []


def test_a_download_resumes_after_the_last_line_handled(fclient, name):
    sender, worker = f"{name}:s", f"{name}:w"
    group = fclient.chat.create(sender, [worker], "resume")
    data = gzip.compress(text("r", 500))
    fid = fclient.files.upload(io.BytesIO(data), group, sender=sender).file_id
    first = []
    for line in fclient.files.lines(fid):
        first.append(line)
        if len(first) == 123:
            break  # the connection drops here
    rest = list(fclient.files.lines(fid, first[-1].offset))
    assert [str(x) for x in first + rest] == gzip.decompress(data).decode().splitlines()
    chunks = b"".join(d for d, _ in fclient.files.chunks(fid, 1000))
    assert chunks == data[1000:]
    assert fclient.files.mark_done(fid, worker) is True
    with pytest.raises(concord.FileNotFound):
        list(fclient.files.lines(fid))


def test_a_download_follows_an_upload_in_progress(fclient, name):
    sender, worker = f"{name}:s", f"{name}:w"
    group = fclient.chat.create(sender, [worker], "follow")
    gate = threading.Event()
    data = text("f", 400)

    def pieces():
        yield data[:3000]
        gate.wait(30)
        yield data[3000:]

    uploader = threading.Thread(target=lambda: fclient.files.upload(pieces(), group, sender=sender), daemon=True)
    uploader.start()
    fid = wait_until(lambda: next((f.file_id for f in fclient.files.list_files(group)[0] if f.size), None),
                     message="the upload to start")
    got: list[str] = []
    follower = threading.Thread(target=lambda: got.extend(fclient.files.lines(fid, worker=worker)), daemon=True)
    follower.start()
    wait_until(lambda: len(got) >= 5, message="the first lines while the upload is still open")
    uploading = fclient.files.list_files(group)[0][0]
    assert uploading.state == "uploading" and uploading.downloads == []  # no pending workers before it completes
    gate.set()
    uploader.join(30)
    follower.join(30)
    assert got == data.decode().splitlines()
    # Its worker became pending when the upload completed: the stream's end was noted.
    assert download_of(fclient, group, worker).offset == len(data)


def test_an_upload_cut_halfway_is_never_announced_and_leaves_nothing(fclient, redis_sync, name):
    sender, worker = f"{name}:s", f"{name}:w"
    group = fclient.chat.create(sender, [worker], "cut")

    def pieces():
        yield b"a" * 5000
        raise RuntimeError("the sender's disk failed")

    with pytest.raises(Exception):
        fclient.files.upload(pieces(), group, sender=sender)
    wait_until(lambda: fclient.files.list_files(group) == ([], 0), message="the partial upload to be deleted")
    assert group_keys(redis_sync, group) == []
    assert [m.body for m in fclient.chat.fetch_pending(worker)] == ["cut"]  # no announcement


def test_a_killed_sender_leaves_nothing(file_server, fclient, redis_sync, name):
    sender, worker = f"{name}:s", f"{name}:w"
    group = fclient.chat.create(sender, [worker], "killed")
    proc = subprocess.Popen([sys.executable, "-c", SLOW_SENDER, file_server.target, group, sender],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "sent"
        wait_until(lambda: fclient.files.list_files(group)[1] >= 4096, message="chunks stored")
        proc.kill()
        wait_until(lambda: fclient.files.list_files(group) == ([], 0), message="the upload to be dropped")
        assert group_keys(redis_sync, group) == []
        assert [m.body for m in fclient.chat.fetch_pending(worker)] == ["killed"]
    finally:
        proc.kill()
        proc.wait()


def download_of(fclient, group: str, worker: str) -> concord.DownloadProgress | None:
    """How far worker's download of the group's only file has got, as ListFiles shows it."""
    files, _ = fclient.files.list_files(group)
    return next((d for f in files for d in f.downloads if d.worker == worker), None)


def test_a_named_download_shows_how_far_it_has_got_until_the_worker_is_done(fclient, redis_sync, name):
    sender, w1, w2 = f"{name}:s", f"{name}:w1", f"{name}:w2"
    group = fclient.chat.create(sender, [w1, w2], "progress")
    data = text("p", 1000)
    fid = fclient.files.upload(io.BytesIO(data), group, sender=sender, name="p.log").file_id

    stream = fclient.files.chunks(fid, worker=w1)
    _, first_offset = next(stream)  # and no more: the stream stays open, the rest unread
    noted = wait_until(lambda: download_of(fclient, group, w1), message="w1's download in ListFiles")
    assert not noted.lines and first_offset <= noted.offset <= len(data)
    assert abs(noted.updated_at - datetime.now(timezone.utc)) < timedelta(minutes=1)

    # Read to its end, a stream's last offset is noted before the stream ends.
    assert len(list(fclient.files.lines(fid, worker=w2))) == 1000
    read_all = download_of(fclient, group, w2)
    assert (read_all.offset, read_all.lines) == (len(data), True)
    # Nothing is noted of a download without a worker, nor of a name the file was not sent to.
    assert b"".join(d for d, _ in fclient.files.chunks(fid)) == data
    assert len(list(fclient.files.lines(fid, worker=sender))) == 1000
    assert [d.worker for d in fclient.files.list_files(group)[0][0].downloads] == [w1, w2]

    stream.close()
    assert fclient.files.mark_done(fid, w1) is False
    assert download_of(fclient, group, w1) is None  # and a note of its closing stream now keeps nothing
    assert download_of(fclient, group, w2) is not None
    assert fclient.files.mark_done(fid, w2) is True  # the last: the file and every note go
    assert group_keys(redis_sync, group) == []


async def test_a_file_deleted_before_its_announcement_takes_its_download_notes(redis_async, name):
    """An upload that completed and then failed to announce is deleted whole (abort): the
    notes of its pending workers go with it. (Only a worker's own notes are kept.)"""
    k = KeySpace("files-notes").file_group(name)

    async def run(script, *args):
        return await script(redis_async, k.keys, [k.channel, k.prefix, *args])

    assert await run(files_primitive._UPLOAD, "begin", 1, "f.log", "s", CHUNK, 60_000) == 1
    assert await run(files_primitive._UPLOAD, "append", 1, "a\nb\n", BOUND, 60_000) == 1
    assert await run(files_primitive._NOTE, 1, "w1", 2, 1) == 0  # not announced: no pending workers yet
    assert await run(files_primitive._UPLOAD, "complete", 1, "w1", "w2") == 1
    assert await run(files_primitive._NOTE, 1, "w1", 2, 1) == 1
    assert await run(files_primitive._NOTE, 1, "stranger", 2, 1) == 0
    entry = await redis_async.hget(k.progress, "1 w1")
    assert entry.startswith("2 1 ") and int(entry.split()[2]) > 0
    assert await redis_async.hkeys(k.progress) == ["1 w1"]
    assert await run(files_primitive._UPLOAD, "abort", 1) == 1
    assert await redis_async.exists(k.progress, k.files, k.held) == 0


def test_uploads_wait_while_other_files_hold_more_than_the_bound(fclient, name):
    sender, worker = f"{name}:s", f"{name}:w"
    group = fclient.chat.create(sender, [worker], "bound")
    first = fclient.files.upload(io.BytesIO(text("a", 200)), group, sender=sender)  # > BOUND on its own: fine
    done = threading.Event()
    threading.Thread(target=lambda: (fclient.files.upload(io.BytesIO(text("b", 200)), group, sender=sender),
                                     done.set()), daemon=True).start()
    wait_until(lambda: len(fclient.files.list_files(group)[0]) == 2, message="the second upload to begin")
    assert not done.wait(0.5)  # blocked behind the first file
    assert fclient.files.list_files(group)[0][1].size < CHUNK + 1
    fclient.files.mark_done(first.file_id, worker)
    assert done.wait(10)


def test_bad_input(fclient, file_server, name):
    sender, worker = f"{name}:s", f"{name}:w"
    group = fclient.chat.create(sender, [worker], "bad")
    with pytest.raises(concord.NotAMember):
        fclient.files.upload(io.BytesIO(b"x"), group, sender=f"{name}:stranger")
    with pytest.raises(concord.ChatNotFound):
        fclient.files.upload(io.BytesIO(b"x"), f"{name}:no-such-group", sender=sender)
    bad = fclient.files.upload(io.BytesIO(b"\x1f\x8b" + b"not really gzip" * 100), group, sender=sender)
    assert bad.gzip
    with pytest.raises(concord.CorruptFile) as err:
        list(fclient.files.lines(bad.file_id))
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(concord.NotAWorker):
        fclient.files.mark_done(bad.file_id, sender)
    with pytest.raises(concord.FileNotFound):
        list(fclient.files.lines(f"999999:{group}"))
    with pytest.raises(concord.InvalidArgument):
        list(fclient.files.lines("not-a-file-id"))
    with pytest.raises(concord.InvalidArgument):
        list(fclient.files.chunks(bad.file_id, 10**9))
    with grpc.insecure_channel(file_server.target) as ch:
        stub = files_pb2_grpc.FileServiceStub(ch)
        with pytest.raises(grpc.RpcError) as rpc_err:
            stub.Upload(iter([pb.UploadRequest(data=b"no header")]), timeout=10)
        assert rpc_err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(rpc_err.value).metadata["field"] == "header"
        with pytest.raises(grpc.RpcError) as rpc_err:
            stub.Upload(iter([pb.UploadRequest(header=pb.UploadHeader(group=group, sender=sender, name="a\nb"))]),
                        timeout=10)
        assert error_info(rpc_err.value).metadata["field"] == "name"
        with pytest.raises(grpc.RpcError) as rpc_err:
            list(stub.Download(pb.DownloadRequest(file_id=bad.file_id, worker=" padded"), timeout=10))
        assert rpc_err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(rpc_err.value).metadata["field"] == "worker"


def test_chunks_never_exceed_the_message_size():
    from concord_server.config import load

    with pytest.raises(SystemExit):
        load(["--file-chunk-size", str(4 * 1024 * 1024), "--max-message-size", str(4 * 1024 * 1024)], environ={})
    assert load([], environ={}).file_chunk_size < load([], environ={}).max_message_size


