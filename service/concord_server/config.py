"""Server settings: each one a --flag and a CONCORD_* environment variable.

A flag beats its environment variable, which beats the default. ``concord-server
--help`` prints them all, generated from the fields below. Durations are written
``500ms``, ``30s``, ``1h``, ``1d`` (a bare number is seconds) and shown that way. A
bad value stops start-up with one line naming the flag or variable it came from,
exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from . import __version__, durations
from .keys import validate_prefix


def _setting(default: object, help: str, **extra: object) -> object:
    return field(default=default, metadata={"help": help, **extra})


@dataclass(frozen=True)
class Settings:
    listen: str = _setting("127.0.0.1:50051", "host:port the gRPC server binds")
    redis_url: str | None = _setting(
        None,
        "Redis to use: redis://[user:password@]host:port/db, rediss:// (TLS), unix:///path.sock, or "
        "redis+sentinel://[user:password@]host:port[,host:port...]/service-name[/db] (rediss+sentinel:// for "
        "TLS; ?sentinel_password=...&sentinel_username=... for the Sentinels' own credentials), which asks the "
        "Sentinels for the primary and follows its failovers. "
        "Unset: start an embedded Valkey with its data in --data-dir",
    )
    redis_cluster: bool = _setting(False, "--redis-url names any node of a Redis Cluster (redis:// or rediss://); "
                                          "the other nodes are discovered and each command goes to its slot's node")
    redis_replica_acks: int = _setting(0, "a state change (grant, release, enqueue, ack, message...) is answered "
                                          "only once this many replicas have it (one WAIT per pipelined batch); "
                                          "fewer in time: UNAVAILABLE / REPLICATION_TIMEOUT. 0: off")
    redis_replica_ack_timeout: float = _setting(0.2, "how long one batch waits for --redis-replica-acks replicas "
                                                     "(at most 250ms, so a blocked call still answers within its "
                                                     "wait + 0.5s)", duration=True)
    redis_aof_acks: bool = _setting(False, "a state change is answered only once the primary's append-only file "
                                           "has it fsynced (WAITAOF; Redis or Valkey 7.2 or later), as well as "
                                           "--redis-replica-acks replicas")
    key_prefix: str = _setting("concord", "prefix of every Redis key and channel Concord uses")
    data_dir: Path = _setting(Path("concord-data"), "data directory of the embedded Valkey (append-only file on)")
    embedded_maxmemory: int = _setting(1024 ** 3, "memory bound of the embedded Valkey, bytes (maxmemory, policy "
                                                  "noeviction: at the bound writes fail RESOURCE_EXHAUSTED / "
                                                  "STORAGE_FULL, nothing is evicted); 0: unbounded")
    workers: int = _setting(1, "server processes sharing the listen port through SO_REUSEPORT")
    log_level: str = _setting("INFO", "DEBUG, INFO, WARNING or ERROR", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    max_message_size: int = _setting(4 * 1024 * 1024, "largest gRPC message accepted or sent, bytes")
    shutdown_grace: float = _setting(10.0, "how long calls and streams get to finish on SIGTERM/SIGINT", duration=True)
    redis_max_connections: int = _setting(16, "Redis Cluster: connections per node for reading the slot map (commands and pub/sub use one connection each, per node)")
    max_ttl: float = _setting(86400.0, "largest lock or permit TTL a client may ask for", duration=True)
    max_wait: float = _setting(3600.0, "largest wait_timeout a client may ask for", duration=True)
    max_semaphore_limit: int = _setting(10_000, "largest semaphore limit a client may ask for")
    semaphore_limit_from_acquire: bool = _setting(
        False, "DEPRECATED, for one release: every semaphore Acquire puts its limit in force (the rule before "
               "SetLimit). Default: the stored limit (set by SetLimit or the first Acquire) holds, and an "
               "Acquire with another limit fails SEMAPHORE_LIMIT_MISMATCH; to migrate, call SetLimit once, "
               "or pass one limit everywhere, or limit 0")
    no_deadlock_detection: bool = _setting(False, "do not look for deadlocks: by default a lock wait whose "
                                           "caller (its owner label) holds locks others wait for is checked for a "
                                           "cycle of waits, and the youngest wait in one fails ABORTED / DEADLOCK")
    queue_max_payload: int = _setting(1024 * 1024, "largest task payload, bytes")
    queue_max_result: int = _setting(1024 * 1024, "largest task result (Ack's result), bytes")
    queue_max_batch: int = _setting(1000, "most tasks one Enqueue adds or one Dequeue takes")
    queue_retry_backoff: float = _setting(1.0, "first automatic retry delay of a failed task; "
                                          "doubles per attempt, at most an hour", duration=True)
    queue_priority_aging: float = _setting(0.0, "0: task priorities are strict (higher first, then FIFO). "
                                           "Else the waiting time worth one priority step, so low "
                                           "priorities cannot starve; use one value for all replicas",
                                           duration=True)

    chat_max_message_size: int = _setting(64 * 1024, "largest chat message body, bytes")
    chat_max_messages: int = _setting(10_000, "most messages a chat keeps; older unseen ones are dropped with a gap marker")
    chat_max_bytes: int = _setting(16 * 1024 * 1024, "most message bytes a chat keeps (same rule)")
    chat_max_members: int = _setting(1000, "most members a chat may have")

    recent_contacts_max: int = _setting(100, "recent contacts kept per user")

    file_chunk_size: int = _setting(256 * 1024, "bytes per stored file chunk (and per Download message)")
    file_group_bound: int = _setting(64 * 1024 * 1024, "uploads wait while a group's other files hold more than "
                                                       "this many bytes")
    file_upload_lease: float = _setting(30.0, "how long an upload may go without a chunk before it is dropped",
                                        duration=True)

    loop_stall_report: str | None = _setting(
        None,
        "write the event loop's stall readings (how late a 10 ms timer fires: max, percentiles, per-second "
        "windows) as JSON to this file every second; with --workers N each process writes FILE.<pid>. "
        "Unset: no monitor",
    )

    metrics_listen: str | None = _setting(
        None, "host:port of an HTTP endpoint serving Prometheus metrics at /metrics (port 0: any free port; "
              "with --workers N, port + i for worker i). Unset: no metrics endpoint")
    console_listen: str | None = _setting(
        None, "host:port of the web console (HTTP; log in with a --auth-tokens token; README \"Web console\"); "
              "port 0: any free port; with --workers N, port + i for worker i. Unset: no console")
    console_history_interval: float = _setting(
        10.0, "how often the console samples each queue's counts for its charts (one process at a time, kept in "
              "Redis: the last 360 samples, an hour at 10s)", duration=True)
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
    tenant_rate: float = _setting(0.0, "requests per second per tenant, across every replica unless "
                                       "--tenant-rate-per-process; 0: unlimited. "
                                       "Without --auth-tokens all callers are one tenant")
    tenant_burst: int = _setting(0, "token bucket size of --tenant-rate; 0: max(1, rate)")
    tenant_rate_per_process: bool = _setting(False, "count --tenant-rate in each process (a local token bucket, "
                                                    "no Redis call; N replicas admit up to N times the rate) "
                                                    "instead of across every replica (one GCRA decision in Redis "
                                                    "per call, the rate-limit service's)")
    tenant_max_blocked: int = _setting(0, "calls that may wait (lock/semaphore Acquire, Dequeue) one tenant may "
                                          "have open per process; 0: unlimited")
    tenant_max_streams: int = _setting(0, "streams one tenant may have open per process; 0: unlimited")
    tenant_max_request_bytes: int = _setting(0, "largest request message of a tenant, bytes; 0: only "
                                                "--max-message-size")
    tenant_storage_bytes: int = _setting(0, "task payload bytes one tenant may store (ready, delayed, leased, dead "
                                            "and retained tasks; quotas.py); past it Enqueue fails "
                                            "RESOURCE_EXHAUSTED / STORAGE_QUOTA_EXCEEDED. 0: unlimited")
    peer_rate: float = _setting(0.0, "requests per second per client connection; 0: unlimited")
    peer_burst: int = _setting(0, "token bucket size of --peer-rate; 0: max(1, rate)")
    peer_max_blocked: int = _setting(0, "calls that may wait one client connection may have open; 0: unlimited")
    peer_max_streams: int = _setting(0, "streams one client connection may have open; 0: unlimited")
    # The connection edge (app.server_options, edge/first_message.py): what a connection holds before any check.
    max_streams_per_connection: int = _setting(100, "calls (unary and streams) one HTTP/2 connection may have open "
                                                    "at once (its MAX_CONCURRENT_STREAMS); streams a client reset "
                                                    "count until the server has let them go, which bounds a "
                                                    "rapid-reset flood")
    max_pending_calls: int = _setting(10_000, "calls received but not yet taken up by the server's event loop; "
                                              "past it new calls are refused RESOURCE_EXHAUSTED at random, past "
                                              "twice it always")
    first_message_timeout: float = _setting(5.0, "how long a call may take to send its first request message "
                                                 "(after its headers) before it is ended DEADLINE_EXCEEDED",
                                            duration=True)

    def __post_init__(self) -> None:
        """Rejects a bad value with InvalidSetting naming the setting(s) at fault; a
        problem's {field} placeholders become the flag or variable the user set."""

        def check(ok: object, fields: str, problem: str) -> None:
            if not ok:
                raise InvalidSetting(fields.split(), problem)

        try:
            validate_prefix(self.key_prefix)
        except ValueError as exc:
            raise InvalidSetting(["key_prefix"], str(exc).removeprefix("key prefix ")) from None
        check(self.redis_url is None or self.redis_url.startswith(
            ("redis://", "rediss://", "unix://", "redis+sentinel://", "rediss+sentinel://")),
              "redis_url", "must start with redis://, rediss://, unix://, redis+sentinel:// or rediss+sentinel://")
        if self.redis_url and "+sentinel://" in self.redis_url:
            from .store.link import Endpoint

            try:
                Endpoint.from_url(self.redis_url)
            except ValueError as exc:
                raise InvalidSetting(["redis_url"], str(exc)) from None
        check(not self.redis_cluster or (self.redis_url or "").startswith(("redis://", "rediss://")),
              "redis_cluster redis_url", "needs {redis_url} set to redis:// or rediss:// naming a node of the cluster")
        check(0 <= self.redis_replica_acks <= 100, "redis_replica_acks", "must be 0 (off) to 100")
        check(0.001 <= self.redis_replica_ack_timeout <= 0.25, "redis_replica_ack_timeout",
              "must be 1ms to 250ms (a blocked call answers within its wait + 0.5s, confirmation included)")
        check(self.workers >= 1, "workers", "must be at least 1")
        check(self.embedded_maxmemory == 0 or self.embedded_maxmemory >= 16 * 1024 ** 2, "embedded_maxmemory",
              "must be 0 (unbounded) or at least 16 MiB")
        check(self.tenant_storage_bytes >= 0, "tenant_storage_bytes", "must not be negative (0: unlimited)")
        check(self.shutdown_grace >= 0, "shutdown_grace", "must not be negative")
        check(self.redis_max_connections >= 2, "redis_max_connections", "must be at least 2")
        check(self.max_ttl >= 0.01, "max_ttl", "must be at least 10ms")
        check(self.max_wait >= 0, "max_wait", "must not be negative")
        check(self.max_semaphore_limit >= 1, "max_semaphore_limit", "must be at least 1")
        check(self.queue_max_batch >= 1, "queue_max_batch", "must be at least 1")
        check(self.queue_max_result >= 0, "queue_max_result", "must not be negative")
        check(0 <= self.queue_priority_aging <= 86400, "queue_priority_aging", "must be 0 to 1d")
        check(0.001 <= self.queue_retry_backoff <= 3600, "queue_retry_backoff", "must be 1ms to 1h")
        check(self.chat_max_message_size >= 1, "chat_max_message_size", "must be at least 1 byte")
        check(self.chat_max_messages >= 1, "chat_max_messages", "must be at least 1")
        check(self.chat_max_members >= 1, "chat_max_members", "must be at least 1")
        check(self.chat_max_bytes >= self.chat_max_message_size, "chat_max_bytes chat_max_message_size",
              f"{{chat_max_bytes}} ({self.chat_max_bytes}) must be at least {{chat_max_message_size}} "
              f"({self.chat_max_message_size})")
        check(1 <= self.recent_contacts_max <= 10_000, "recent_contacts_max", "must be 1 to 10000")
        check(1024 <= self.file_chunk_size <= self.max_message_size - 1024, "file_chunk_size max_message_size",
              f"{{file_chunk_size}} ({self.file_chunk_size}) must be at least 1024 and at most "
              f"{{max_message_size}} ({self.max_message_size}) - 1024")
        check(1 <= self.queue_max_payload <= self.max_message_size - 64 * 1024, "queue_max_payload max_message_size",
              f"{{queue_max_payload}} ({self.queue_max_payload}) must be at least 1 byte and leave 64 KiB of "
              f"{{max_message_size}} ({self.max_message_size}) for the rest of a task's reply")
        check(self.file_group_bound >= 1, "file_group_bound", "must be at least 1 byte")
        check(0.1 <= self.file_upload_lease <= 3600, "file_upload_lease", "must be 100ms to 1h")
        check(self.metrics_listen is None or _host_port(self.metrics_listen), "metrics_listen", "must be host:port")
        check(self.console_listen is None or _host_port(self.console_listen), "console_listen", "must be host:port")
        check(0.1 <= self.console_history_interval <= 3600, "console_history_interval", "must be 100ms to 1h")
        check(_host_port(self.listen), "listen", "must be host:port")
        check((self.tls_cert is None) == (self.tls_key is None), "tls_cert tls_key",
              "needs {tls_key} too" if self.tls_key is None else "needs {tls_cert} too")
        check(not self.tls_client_ca or self.tls_cert, "tls_client_ca", "needs {tls_cert} and {tls_key}")
        for name in ("tenant_rate", "tenant_burst", "tenant_max_blocked", "tenant_max_streams",
                     "tenant_max_request_bytes", "peer_rate", "peer_burst", "peer_max_blocked", "peer_max_streams"):
            check(getattr(self, name) >= 0, name, "must not be negative (0: unlimited)")
        check(1 <= self.max_streams_per_connection <= 100_000, "max_streams_per_connection", "must be 1 to 100000")
        check(100 <= self.max_pending_calls <= 1_000_000, "max_pending_calls", "must be 100 to 1000000")
        check(0.05 <= self.first_message_timeout <= 3600, "first_message_timeout", "must be 50ms to 1h")


def _host_port(text: str) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port.isdigit() and int(port) < 65536)


class InvalidSetting(ValueError):
    """A setting's value is wrong. ``fields`` are the settings involved, the one to
    blame first; ``problem`` may name others as ``{field}``, which load() turns into
    the flag or variable the user set."""

    def __init__(self, fields: Sequence[str], problem: str) -> None:
        self.fields = list(fields)
        self.problem = problem
        names = {f.name: "--" + f.name.replace("_", "-") for f in dataclasses.fields(Settings)}
        super().__init__(f"{names[self.fields[0]]}: {problem.format_map(names)}")


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def env_name(f: dataclasses.Field) -> str:
    return "CONCORD_" + f.name.upper()


def flag_name(f: dataclasses.Field) -> str:
    return "--" + f.name.replace("_", "-")


def _shown(f: dataclasses.Field, value: object) -> str:
    """A value as --help and messages show it: durations in human units."""
    if f.metadata.get("duration") and isinstance(value, (int, float)):
        return durations.human(value)
    return str(value)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, not the whole usage text."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)")


def fail(message: str) -> NoReturn:
    """One line on stderr naming what the user set, exit status 2 (a usage error)."""
    print(f"concord-server: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="concord-server",
        description="Concord coordination service: locks, semaphores, task queues, group chat, autocomplete and file distribution over gRPC, kept in Redis.",
        epilog="Every option can also be set by the environment variable named after it. Durations take a "
               "unit (500ms, 30s, 5m, 1h, 1d; a bare number is seconds).",
    )
    p.add_argument("--version", action="version", version=f"concord-server {__version__}")
    for f in dataclasses.fields(Settings):
        # A bool is a bare flag (--redis-cluster); its variable takes true/false. Values are
        # checked in load(), for flags and variables alike.
        kind: dict[str, object] = {"action": "store_const", "const": "true"} if isinstance(f.default, bool) else {}
        if f.metadata.get("choices"):
            kind["metavar"] = "{" + ",".join(f.metadata["choices"]) + "}"
        elif f.metadata.get("duration"):
            kind["metavar"] = "DURATION"
        default = "" if f.default is None or isinstance(f.default, bool) else f" (default: {_shown(f, f.default)})"
        p.add_argument(
            flag_name(f),
            dest=f.name,
            default=argparse.SUPPRESS,
            help=f"{f.metadata['help']} [env {env_name(f)}]{default}",
            **kind,
        )
    return p


def _convert(f: dataclasses.Field, raw: str) -> object:
    """A flag's or variable's text as the field's type; ValueError says what was expected."""
    if f.metadata.get("choices"):
        for choice in f.metadata["choices"]:
            if raw.lower() == choice.lower():
                return choice
        raise ValueError("expected one of " + ", ".join(f.metadata["choices"]))
    if isinstance(f.default, bool):
        if raw.lower() not in _BOOLS:
            raise ValueError("expected true or false")
        return _BOOLS[raw.lower()]
    if f.metadata.get("duration"):
        try:
            return durations.parse(raw)
        except ValueError:
            raise ValueError("expected a duration such as 500ms, 30s, 5m, 1h or 1d "
                             "(a bare number is seconds)") from None
    kind = type(f.default) if f.default is not None else str
    if kind is int:
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            raise ValueError("expected a whole number") from None
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise ValueError("expected a number") from None
    return kind(raw)


def load(argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ) -> Settings:
    """Settings from flags, then CONCORD_* variables, then defaults. A bad value ends
    the process with one line naming the flag or variable it came from (exit 2)."""
    given = vars(parser().parse_args(argv))
    values: dict[str, object] = {}
    origin: dict[str, tuple[str, str]] = {}  # field -> (flag or variable, raw text) the user set
    for f in dataclasses.fields(Settings):
        if f.name in given:
            origin[f.name] = (flag_name(f), given[f.name])
        elif environ.get(env_name(f), "") != "":
            origin[f.name] = (env_name(f), environ[env_name(f)])
        else:
            continue
        source, raw = origin[f.name]
        try:
            values[f.name] = _convert(f, raw)
        except ValueError as exc:
            fail(f"{source}: invalid value {raw!r}: {exc}")
    try:
        return Settings(**values)
    except InvalidSetting as exc:
        fail(describe(exc, origin))


def origin_of(name: str, value: object, argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """How the user set a (valid) setting, for a message about it: ``--listen
    127.0.0.1:50051``, ``CONCORD_LISTEN=127.0.0.1:50051`` or ``--listen
    127.0.0.1:50051 (the default)``."""
    f = next(f for f in dataclasses.fields(Settings) if f.name == name)
    if name in vars(parser().parse_args(argv)):
        return f"{flag_name(f)} {_shown(f, value)}"
    if environ.get(env_name(f), "") != "":
        return f"{env_name(f)}={environ[env_name(f)]}"
    return f"{flag_name(f)} {_shown(f, value)} (the default)"


def describe(exc: InvalidSetting, origin: Mapping[str, tuple[str, str]]) -> str:
    """The error as the user set things: ``CONCORD_WORKERS: invalid value '0': must be at
    least 1``, blaming the first of exc.fields the user set."""
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    blamed = next((name for name in exc.fields if name in origin), exc.fields[0])
    names = {name: origin[name][0] if name in origin else flag_name(f) for name, f in fields.items()}
    problem = exc.problem.format_map(names)
    if blamed in origin:
        source, raw = origin[blamed]
        if isinstance(fields[blamed].default, bool) and source.startswith("--"):
            return f"{source}: {problem}"  # a bare flag has no value to quote
        return f"{source}: invalid value {raw!r}: {problem}"
    return f"{flag_name(fields[blamed])} (default {_shown(fields[blamed], fields[blamed].default)}): {problem}"
