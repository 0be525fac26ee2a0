"""Server settings: each one a --flag and a CONCORD_* environment variable.

A flag beats its environment variable, which beats the default. ``concord-server
--help`` prints them all, generated from the fields below.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .keys import validate_prefix


def _setting(default: object, help: str, **extra: object) -> object:
    return field(default=default, metadata={"help": help, **extra})


@dataclass(frozen=True)
class Settings:
    listen: str = _setting("127.0.0.1:50051", "host:port the gRPC server binds")
    redis_url: str | None = _setting(
        None,
        "Redis to use: redis://[user:password@]host:port/db, rediss:// (TLS) or unix:///path.sock. "
        "Unset: start an embedded Valkey with its data in --data-dir",
    )
    redis_cluster: bool = _setting(False, "--redis-url names any node of a Redis Cluster (redis:// or rediss://); "
                                          "the other nodes are discovered and each command goes to its slot's node")
    key_prefix: str = _setting("concord", "prefix of every Redis key and channel Concord uses")
    data_dir: Path = _setting(Path("concord-data"), "data directory of the embedded Valkey (append-only file on)")
    workers: int = _setting(1, "server processes sharing the listen port through SO_REUSEPORT")
    log_level: str = _setting("INFO", "DEBUG, INFO, WARNING or ERROR", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    max_message_size: int = _setting(4 * 1024 * 1024, "largest gRPC message accepted or sent, bytes")
    shutdown_grace: float = _setting(10.0, "seconds that calls and streams get to finish on SIGTERM/SIGINT")
    redis_max_connections: int = _setting(16, "Redis connections per server process, pub/sub included")
    max_ttl: float = _setting(86400.0, "largest lock or permit TTL a client may ask for, seconds")
    max_wait: float = _setting(3600.0, "largest wait_timeout a client may ask for, seconds")
    max_semaphore_limit: int = _setting(10_000, "largest semaphore limit a client may ask for")
    queue_max_payload: int = _setting(1024 * 1024, "largest task payload, bytes")
    queue_max_batch: int = _setting(1000, "most tasks one Enqueue adds or one Dequeue takes")
    queue_retry_backoff: float = _setting(1.0, "first automatic retry delay of a failed task, seconds; "
                                          "doubles per attempt, at most an hour")
    queue_priority_aging: float = _setting(0.0, "0: task priorities are strict (higher first, then FIFO). "
                                           "Else seconds of waiting worth one priority step, so low "
                                           "priorities cannot starve; use one value for all replicas")

    chat_max_message_size: int = _setting(64 * 1024, "largest chat message body, bytes")
    chat_max_messages: int = _setting(10_000, "most messages a chat keeps; older unseen ones are dropped with a gap marker")
    chat_max_bytes: int = _setting(16 * 1024 * 1024, "most message bytes a chat keeps (same rule)")
    chat_max_members: int = _setting(1000, "most members a chat may have")

    recent_contacts_max: int = _setting(100, "recent contacts kept per user")

    file_chunk_size: int = _setting(256 * 1024, "bytes per stored file chunk (and per Download message)")
    file_group_bound: int = _setting(64 * 1024 * 1024, "uploads wait while a group's other files hold more than "
                                                       "this many bytes")
    file_upload_lease: float = _setting(30.0, "seconds an upload may go without a chunk before it is dropped")

    loop_stall_report: str | None = _setting(
        None,
        "write the event loop's stall readings (how late a 10 ms timer fires: max, percentiles, per-second "
        "windows) as JSON to this file every second; with --workers N each process writes FILE.<pid>. "
        "Unset: no monitor",
    )

    metrics_listen: str | None = _setting(
        None, "host:port of an HTTP endpoint serving Prometheus metrics at /metrics (port 0: any free port; "
              "with --workers N, port + i for worker i). Unset: no metrics endpoint")
    log_format: str = _setting("text", "text: one human-readable line per record; json: one JSON object per line "
                                       "(time, level, logger, message, exception)", choices=["text", "json"])
    tracing: bool = _setting(False, "trace gRPC calls with OpenTelemetry (needs the [tracing] extra); exporter "
                                    "and sampling come from the standard OTEL_* variables")

    # Security (README "Security"): TLS to clients, bearer tokens and tenants, limits.
    tls_cert: str | None = _setting(None, "PEM certificate chain of the server; with --tls-key the port is TLS only. "
                                          "Unset: plaintext")
    tls_key: str | None = _setting(None, "PEM private key of --tls-cert")
    tls_client_ca: str | None = _setting(None, "PEM CA bundle: clients must present a certificate it signed "
                                               "(mutual TLS); needs --tls-cert")
    auth_tokens: str | None = _setting(None, "TOML file of bearer tokens, each naming its tenant (its own key "
                                             "namespace), optionally the services it may call and the tenant's "
                                             "limits; re-read on SIGHUP. Unset: no authentication")
    auth_health: bool = _setting(False, "with --auth-tokens, health and reflection need a token too "
                                        "(default: they stay open)")
    tenant_rate: float = _setting(0.0, "requests per second per tenant and process (token bucket); 0: unlimited. "
                                       "Without --auth-tokens all callers are one tenant")
    tenant_burst: int = _setting(0, "token bucket size of --tenant-rate; 0: max(1, rate)")
    tenant_max_blocked: int = _setting(0, "calls that may wait (lock/semaphore Acquire, Dequeue) one tenant may "
                                          "have open per process; 0: unlimited")
    tenant_max_streams: int = _setting(0, "streams one tenant may have open per process; 0: unlimited")
    tenant_max_request_bytes: int = _setting(0, "largest request message of a tenant, bytes; 0: only "
                                                "--max-message-size")
    peer_rate: float = _setting(0.0, "requests per second per client connection; 0: unlimited")
    peer_burst: int = _setting(0, "token bucket size of --peer-rate; 0: max(1, rate)")
    peer_max_blocked: int = _setting(0, "calls that may wait one client connection may have open; 0: unlimited")
    peer_max_streams: int = _setting(0, "streams one client connection may have open; 0: unlimited")

    def __post_init__(self) -> None:
        validate_prefix(self.key_prefix)
        if (self.tls_cert is None) != (self.tls_key is None) or (self.tls_client_ca and not self.tls_cert):
            raise ValueError("--tls-cert and --tls-key go together; --tls-client-ca needs them")
        if min(self.tenant_rate, self.tenant_burst, self.tenant_max_blocked, self.tenant_max_streams,
               self.tenant_max_request_bytes, self.peer_rate, self.peer_burst, self.peer_max_blocked,
               self.peer_max_streams) < 0:
            raise ValueError("limits must not be negative")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.queue_max_batch < 1 or self.queue_max_payload < 1:
            raise ValueError("queue_max_batch and queue_max_payload must be positive")
        if not 0 <= self.queue_priority_aging <= 86400 or not 0.001 <= self.queue_retry_backoff <= 3600:
            raise ValueError("queue_priority_aging must be 0-86400 s and queue_retry_backoff 0.001-3600 s")
        if min(self.chat_max_message_size, self.chat_max_messages, self.chat_max_members) < 1:
            raise ValueError("chat limits must be positive")
        if self.chat_max_bytes < self.chat_max_message_size:
            raise ValueError("chat_max_bytes must be at least chat_max_message_size")
        if not 1024 <= self.file_chunk_size <= self.max_message_size - 1024:
            raise ValueError("file_chunk_size must be 1 KiB to max_message_size - 1 KiB")
        if self.file_group_bound < 1 or not 0.1 <= self.file_upload_lease <= 3600:
            raise ValueError("file_group_bound must be positive and file_upload_lease 0.1-3600 s")
        if not 1 <= self.recent_contacts_max <= 10_000:
            raise ValueError("recent_contacts_max must be 1-10000")
        if self.metrics_listen is not None and not self.metrics_listen.rpartition(":")[2].isdigit():
            raise ValueError("--metrics-listen must be host:port")
        if self.redis_max_connections < 2:
            raise ValueError("redis_max_connections must be at least 2 (one is pub/sub)")
        if self.redis_cluster and not (self.redis_url or "").startswith(("redis://", "rediss://")):
            raise ValueError("--redis-cluster needs a --redis-url redis:// or rediss:// naming a node of the cluster")


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def env_name(f: dataclasses.Field) -> str:
    return "CONCORD_" + f.name.upper()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="concord-server",
        description="Concord coordination service: locks, semaphores, task queues, group chat, autocomplete and file distribution over gRPC, kept in Redis.",
        epilog="Every option can also be set by the environment variable named after it.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    for f in dataclasses.fields(Settings):
        # A bool is a bare flag (--redis-cluster); its variable takes true/false.
        kind = {"action": "store_const", "const": "true"} if isinstance(f.default, bool) else {
            "choices": f.metadata.get("choices")}
        p.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            default=argparse.SUPPRESS,
            help=f"{f.metadata['help']} [env {env_name(f)}] (default: {f.default})",
            **kind,
        )
    return p


def load(argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ) -> Settings:
    """Settings from flags, then CONCORD_* variables, then defaults."""
    p = parser()
    given = vars(p.parse_args(argv))
    values: dict[str, object] = {}
    for f in dataclasses.fields(Settings):
        raw = given.get(f.name, environ.get(env_name(f)))
        if raw is None or raw == "":
            continue
        kind = type(f.default) if f.default is not None else str
        try:
            values[f.name] = _BOOLS[raw.lower()] if kind is bool else kind(raw)
        except KeyError:
            p.error(f"--{f.name.replace('_', '-')}: {env_name(f)} must be true or false, not {raw!r}")
        except ValueError:
            p.error(f"--{f.name.replace('_', '-')}: invalid value {raw!r}")
    try:
        return Settings(**values)
    except ValueError as exc:
        p.error(str(exc))
        raise  # unreachable: p.error exits
