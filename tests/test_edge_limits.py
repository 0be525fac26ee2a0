"""The connection edge against raw HTTP/2 (the h2 library): what one connection may
cost the server before any check has run.

- Rapid reset (CVE-2023-44487): a connection sending HEADERS then RST_STREAM in a
  loop, no token. The server advertises a stream limit (the gRPC core then counts
  reset streams it has not let go and refuses past it), another client keeps being
  answered, and the server's memory comes back near its baseline.
- Half-open calls: streams whose request message never comes. Without a valid token
  they are refused from their headers alone; with one, they end when the first
  message does not arrive within --first-message-timeout.
"""

from __future__ import annotations

import base64
import socket
import threading
import time

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import psutil
import pytest
from google.rpc import error_details_pb2, status_pb2

from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from support import ServerProcess, wait_until

TOKEN = "edge-token-0123456789abcdef"
DESCRIBE = "/concord.lock.v1.LockService/Describe"
STREAMS_PER_CONNECTION = 100  # the default of --max-streams-per-connection


class RawH2:
    """A plaintext HTTP/2 client connection that sends frames as told and records,
    per stream, the grpc-status the server ended it with."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.status: dict[int, tuple[str, str | None]] = {}  # stream -> (grpc-status, grpc-status-details-bin)
        self.closed = False
        self.settings: dict[int, int] | None = None  # what the server's SETTINGS frame set
        self.flush()

    def open(self, path: str = DESCRIBE, token: str | None = None, end_stream: bool = False) -> int:
        sid = self.conn.get_next_available_stream_id()
        headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "concord"),
                   ("content-type", "application/grpc"), ("te", "trailers")]
        if token:
            headers.append(("authorization", f"Bearer {token}"))
        self.conn.send_headers(sid, headers, end_stream=end_stream)
        return sid

    def reset(self, sid: int) -> None:
        self.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def pump(self, seconds: float = 0.0) -> None:
        """Reads what the server sent, for up to ``seconds`` (0: what is there now)."""
        self.sock.settimeout(max(seconds, 0.001))
        try:
            data = self.sock.recv(1 << 20)
        except (TimeoutError, BlockingIOError):
            return
        if not data:
            self.closed = True
            return
        for event in self.conn.receive_data(data):
            if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                fields = dict(event.headers)
                if "grpc-status" in fields:
                    self.status[event.stream_id] = (fields["grpc-status"], fields.get("grpc-status-details-bin"))
            elif isinstance(event, h2.events.RemoteSettingsChanged):
                self.settings = {**(self.settings or {}), **{k: v.new_value for k, v in event.changed_settings.items()}}
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.closed = True
        self.flush()

    def close(self) -> None:
        self.sock.close()


def error_reason(details_bin: str | None) -> str | None:
    if not details_bin:
        return None
    status = status_pb2.Status.FromString(base64.b64decode(details_bin + "=" * (-len(details_bin) % 4)))
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info.reason
    return None


def server_rss(server: ServerProcess) -> int:
    return psutil.Process(server.proc.pid).memory_info().rss


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("edge") / "tokens.toml"
    path.write_text(f'[[tokens]]\ntoken = "{TOKEN}"\ntenant = "edge"\n')
    return path


@pytest.fixture(scope="module")
def open_server(redis_server, tmp_path_factory):
    """No --auth-tokens: the development default, where anyone may call."""
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "edgetest", "--first-message-timeout", "300ms")
    s.start(tmp_path_factory.mktemp("edge-open") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def auth_server(redis_server, token_file, tmp_path_factory):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "edgetest", "--auth-tokens", str(token_file),
                      "--first-message-timeout", "300ms")
    s.start(tmp_path_factory.mktemp("edge-auth") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


def test_server_advertises_a_stream_limit_per_connection(open_server):
    conn = RawH2(open_server.target)
    try:
        wait_until(lambda: conn.pump(0.1) or conn.settings is not None, message="the server's SETTINGS")
        assert conn.settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS) == STREAMS_PER_CONNECTION
    finally:
        conn.close()


def test_rapid_reset_flood_neither_starves_other_clients_nor_keeps_memory(open_server):
    with grpc.insecure_channel(open_server.target) as ch:
        stub = lock_pb2_grpc.LockServiceStub(ch)
        stub.Describe(lock_pb2.DescribeRequest(name="edge"), timeout=10)
        baseline = server_rss(open_server)
        failures: list[grpc.StatusCode] = []
        answered = 0
        attacking = threading.Event()
        done = threading.Event()

        def probe() -> None:  # another client, on its own connection, all through the attack
            nonlocal answered
            while not done.is_set():
                try:
                    stub.Describe(lock_pb2.DescribeRequest(name="edge"), timeout=10)
                    answered += attacking.is_set()
                except grpc.RpcError as err:
                    failures.append(err.code())
                done.wait(0.05)

        prober = threading.Thread(target=probe)
        prober.start()
        sent = 0
        try:
            attacking.set()
            conn = RawH2(open_server.target)
            while sent < 40_000:  # the old server grew by ~0.9 GB in as many
                if conn.closed:  # the server may end the connection (GOAWAY): open another, as an attacker would
                    conn.close()
                    conn = RawH2(open_server.target)
                try:
                    for _ in range(100):
                        conn.reset(conn.open())
                        sent += 1
                    conn.flush()
                except (h2.exceptions.ProtocolError, OSError):
                    conn.closed = True
                conn.pump()
            conn.close()
            wait_until(lambda: answered >= 3 or bool(failures), timeout=30,
                       message="the other client to be answered during the attack")
        finally:
            attacking.clear()
            done.set()
            prober.join()
        assert not failures, f"the other client's calls failed during the attack: {failures}"
        wait_until(lambda: server_rss(open_server) <= baseline * 1.25, timeout=30,
                   message=f"server RSS back within 25% of its baseline {baseline >> 20} MiB "
                           f"(now {server_rss(open_server) >> 20} MiB)")
        stub.Describe(lock_pb2.DescribeRequest(name="edge"), timeout=10)


def _statuses(conns: list[RawH2], streams: dict[RawH2, list[int]], timeout: float) -> list[tuple[str, str | None]]:
    """Waits (with a deadline) until every stream has a grpc-status; returns them."""

    def all_answered() -> bool:
        for conn in conns:
            conn.pump(0.01)
        return all(sid in conn.status for conn in conns for sid in streams[conn])

    wait_until(all_answered, timeout=timeout, message="every half-open stream to be answered")
    return [conn.status[sid] for conn in conns for sid in streams[conn]]


def test_half_open_calls_without_a_token_are_refused_from_their_headers(auth_server):
    conns = [RawH2(auth_server.target) for _ in range(3)]
    try:
        streams = {conn: [conn.open() for _ in range(STREAMS_PER_CONNECTION)] for conn in conns}
        for conn in conns:
            conn.flush()  # headers only: no message is ever sent
        answers = _statuses(conns, streams, timeout=30)
        assert {status for status, _ in answers} == {str(grpc.StatusCode.UNAUTHENTICATED.value[0])}
        assert {error_reason(details) for _, details in answers} == {"UNAUTHENTICATED"}
    finally:
        for conn in conns:
            conn.close()


@pytest.mark.parametrize("token", [TOKEN, None], ids=["auth-token", "no-auth"])
def test_a_call_whose_message_never_comes_ends_after_the_first_message_timeout(auth_server, open_server, token):
    server = auth_server if token else open_server
    conn = RawH2(server.target)
    try:
        streams = {conn: [conn.open(token=token) for _ in range(50)]}
        conn.flush()
        answers = _statuses([conn], streams, timeout=30)
        assert {status for status, _ in answers} == {str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0])}
        assert {error_reason(details) for _, details in answers} == {"DEADLINE_EXCEEDED"}
        empty = conn.open(token=token, end_stream=True)  # half-closed with no message at all
        conn.flush()
        (status, details), = _statuses([conn], {conn: [empty]}, timeout=30)
        assert (status, error_reason(details)) == (str(grpc.StatusCode.INVALID_ARGUMENT.value[0]), "INVALID_ARGUMENT")
    finally:
        conn.close()
    with grpc.insecure_channel(server.target) as ch:  # a call that sends its message is served as ever
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        assert not lock_pb2_grpc.LockServiceStub(ch).Describe(lock_pb2.DescribeRequest(name="edge"),
                                                              metadata=metadata, timeout=10).held
