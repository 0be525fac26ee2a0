"""Item 2, half-open calls with no token: streams opened (HEADERS), the request
message never sent, kept open for the attack; 50,000 in the full form. Each
connection carries streams until the server refuses more (its per-connection cap:
SETTINGS_MAX_CONCURRENT_STREAMS or RST_STREAM), then the attacker opens another
connection, up to MAX_CONNECTIONS. The bound: the victim's p99 and the server's
memory, which must come back once the attacker goes away."""

from __future__ import annotations

import h2.exceptions

from .h2wire import RawH2

PATH = "/concord.lock.v1.LockService/Describe"
MAX_CONNECTIONS = 1000
PER_CONNECTION = 5000  # the most this attacker tries on one connection


def run(ctx) -> None:
    want = ctx.scale.n(5_000, 50_000)
    warm = RawH2(ctx.server.target, ctx.codes)
    warm.open_stream(PATH)
    warm.flush()
    warm.pump(0.2)
    warm.close()
    ctx.baseline()
    conns: list[RawH2] = []
    opened = 0
    with ctx.attacking():
        for _ in ctx.until():
            if opened >= want or len(conns) >= MAX_CONNECTIONS:
                for c in conns:  # hold them, reading what the server says
                    c.pump()
                continue
            conn = RawH2(ctx.server.target, ctx.codes)
            conns.append(conn)
            conn.pump(0.05)  # the server's SETTINGS (its stream cap) before opening streams
            try:
                for _ in range(min(PER_CONNECTION, want - opened)):
                    conn.open_stream(PATH)
                    opened += 1
                    if opened % 100 == 0:
                        conn.flush()
            except h2.exceptions.TooManyStreamsError:
                pass
            conn.flush()
            conn.pump()
        refused = sum(c.refused for c in conns)
        closed = sum(c.closed for c in conns)
        for c in conns:
            c.close()
    ctx.figures.update(streams_opened=opened, connections=len(conns), streams_reset_by_server=refused,
                       connections_closed_by_server=closed)
