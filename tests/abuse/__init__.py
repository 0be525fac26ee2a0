"""The abuse suite: each attack of issue 30 (items 1-10) replayed against a live
concord-server while another tenant measures what it costs them.

harness.py starts the server (embedded Valkey, a token file with the tenants
"victim" and "attacker"), runs the victim's probe in a process of its own
(probe.py: a lock Describe every PROBE_INTERVAL, each latency and status code
written down) and samples the server's RSS. Each attack module has one
``run(ctx)`` that plays its attack between the harness's baseline and recovery
phases and checks the promise specific to it; the harness checks what every
attack must keep (victim p99, memory back, no INTERNAL/UNKNOWN).
"""
