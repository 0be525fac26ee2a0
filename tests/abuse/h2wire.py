"""Raw HTTP/2 to the gRPC port (the ``h2`` package): what a hostile peer can send that
no gRPC client library would, e.g. HEADERS then RST_STREAM in a loop, or streams
whose request message never comes. It records the grpc-status of every answer it
reads, so the harness can check that none is INTERNAL or UNKNOWN."""

from __future__ import annotations

import contextlib
import socket
from collections import Counter

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

_CODE_NAMES = {c.value[0]: c.name for c in grpc.StatusCode}


class RawH2:
    """One plaintext HTTP/2 connection speaking gRPC's framing by hand."""

    def __init__(self, target: str, codes: Counter) -> None:
        host, _, port = target.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.authority = target
        self.codes = codes  # (who, code name) -> count
        self.closed = False  # GOAWAY received or socket gone
        self.goaway: str | None = None
        self.refused = 0  # streams the server reset before answering
        self.flush()

    def headers(self, path: str, token: str | None = None) -> list[tuple[str, str]]:
        hs = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", self.authority),
              ("content-type", "application/grpc"), ("te", "trailers")]
        if token:
            hs.append(("authorization", f"Bearer {token}"))
        return hs

    def open_stream(self, path: str, token: str | None = None) -> int:
        """HEADERS without END_STREAM: a call whose request message never follows."""
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, self.headers(path, token))
        return sid

    def reset(self, sid: int) -> None:
        self.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data and not self.closed:
            try:
                self.sock.sendall(data)
            except OSError:
                self.closed = True

    def pump(self, wait: float = 0.0) -> None:
        """Reads what the server sent (non-blocking unless ``wait``) and records it."""
        self.sock.settimeout(wait if wait > 0 else 0.0)
        while not self.closed:
            try:
                data = self.sock.recv(1 << 20)
            except (BlockingIOError, socket.timeout):
                break
            except OSError:
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.closed = True
                break
            for event in events:
                self._note(event)
            self.sock.settimeout(0.0)
        self.flush()

    def _note(self, event) -> None:
        if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
            status = dict(event.headers).get("grpc-status")
            if status is not None:
                self.codes[("attacker", _CODE_NAMES.get(int(status), f"status-{status}"))] += 1
        elif isinstance(event, h2.events.StreamReset):
            self.refused += 1
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closed = True
            try:
                self.goaway = h2.errors.ErrorCodes(event.error_code).name
            except ValueError:
                self.goaway = str(event.error_code)
        if isinstance(event, h2.events.DataReceived):
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if not self.closed:
                self.conn.close_connection()
                self.flush()
        with contextlib.suppress(OSError):
            self.sock.close()
        self.closed = True
