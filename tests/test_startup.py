"""concord-server's start-up, run as users run it (the installed command, a
subprocess): a bad setting or a busy port is one line on stderr naming what the user
set (the flag, or the variable), exit status 2, before anything starts (no embedded
Valkey, no data directory); durations read in human units; --version."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import concord
from concord_server import __version__, config
from support import free_port

SERVER = Path(sys.executable).with_name("concord-server")
COMMAND = [str(SERVER)] if SERVER.exists() else [sys.executable, "-m", "concord_server"]


def start(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs concord-server to its exit (it must not get as far as serving) without
    any CONCORD_* variable of the test's own environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONCORD_")}
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=30, cwd=cwd,
                          env={**clean, **(env or {})})


def one_line_exit_2(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("concord-server: "), done.stderr
    assert "usage:" not in done.stderr and "Traceback" not in done.stderr and not done.stdout
    return done.stderr.strip()


def test_version():
    done = start("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"concord-server {__version__}")


@pytest.fixture
def busy_port():
    """A port something listens on (not with SO_REUSEPORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def test_a_busy_port_is_one_line_and_nothing_starts(busy_port, tmp_path):
    """Without --redis-url the server would start an embedded Valkey in --data-dir:
    it does not get that far."""
    began = time.monotonic()
    line = one_line_exit_2(start("--listen", f"127.0.0.1:{busy_port}", "--data-dir", str(tmp_path / "data")))
    assert line == (f"concord-server: --listen 127.0.0.1:{busy_port}: cannot listen: port {busy_port} is already "
                    "in use")
    assert not (tmp_path / "data").exists(), "the embedded Valkey's data directory was created"
    assert time.monotonic() - began < 10

    line = one_line_exit_2(start(env={"CONCORD_LISTEN": f"127.0.0.1:{busy_port}",
                                      "CONCORD_DATA_DIR": str(tmp_path / "data")}))
    assert line.startswith(f"concord-server: CONCORD_LISTEN=127.0.0.1:{busy_port}: cannot listen: ")
    assert not (tmp_path / "data").exists()


def test_the_port_of_a_running_server_is_busy(concord_server, redis_server):
    """Another concord-server on the port counts, though gRPC could share it (SO_REUSEPORT)."""
    line = one_line_exit_2(start("--listen", concord_server.target, "--redis-url", redis_server.url))
    assert f"--listen {concord_server.target}: cannot listen: port {concord_server.port} is already in use" in line


def test_messages_say_where_a_setting_came_from():
    """The default port cannot be made busy here (a developer's `make run` may hold
    it), so how a message names each origin is checked directly."""
    assert config.origin_of("listen", "127.0.0.1:50051", [], {}) == "--listen 127.0.0.1:50051 (the default)"
    assert config.origin_of("listen", "0.0.0.0:1", [], {"CONCORD_LISTEN": "0.0.0.0:1"}) == "CONCORD_LISTEN=0.0.0.0:1"
    assert config.origin_of("listen", "0.0.0.0:2", ["--listen", "0.0.0.0:2"],
                            {"CONCORD_LISTEN": "0.0.0.0:1"}) == "--listen 0.0.0.0:2"
    assert config.origin_of("max_ttl", 7200.0, ["--max-ttl", "7200"], {}) == "--max-ttl 2h"


def test_a_busy_metrics_port_is_one_line(busy_port, redis_server):
    line = one_line_exit_2(start("--listen", f"127.0.0.1:{free_port()}", "--redis-url", redis_server.url,
                                 "--metrics-listen", f"127.0.0.1:{busy_port}"))
    assert line == (f"concord-server: --metrics-listen 127.0.0.1:{busy_port}: cannot listen: port {busy_port} is "
                    "already in use")


def test_a_busy_console_port_is_one_line(busy_port, redis_server):
    line = one_line_exit_2(start("--listen", f"127.0.0.1:{free_port()}", "--redis-url", redis_server.url,
                                 env={"CONCORD_CONSOLE_LISTEN": f"127.0.0.1:{busy_port}"}))
    assert line == (f"concord-server: CONCORD_CONSOLE_LISTEN=127.0.0.1:{busy_port}: cannot listen: port {busy_port} "
                    "is already in use")
    line = one_line_exit_2(start("--console-listen", "nowhere"))
    assert line == "concord-server: --console-listen: invalid value 'nowhere': must be host:port"


@pytest.mark.parametrize("args, env, expected", [
    (["--workers", "0"], {}, "concord-server: --workers: invalid value '0': must be at least 1"),
    ([], {"CONCORD_WORKERS": "x"}, "concord-server: CONCORD_WORKERS: invalid value 'x': expected a whole number"),
    ([], {"CONCORD_WORKERS": "0"}, "concord-server: CONCORD_WORKERS: invalid value '0': must be at least 1"),
    (["--max-ttl", "forever"], {}, "concord-server: --max-ttl: invalid value 'forever': expected a duration"),
    ([], {"CONCORD_REDIS_CLUSTER": "maybe"},
     "concord-server: CONCORD_REDIS_CLUSTER: invalid value 'maybe': expected true or false"),
    (["--log-level", "LOUD"], {}, "concord-server: --log-level: invalid value 'LOUD': expected one of DEBUG, INFO"),
    ([], {"CONCORD_LOG_LEVEL": "LOUD"}, "concord-server: CONCORD_LOG_LEVEL: invalid value 'LOUD': expected one of"),
    (["--key-prefix", "a{b}"], {}, "concord-server: --key-prefix: invalid value 'a{b}': must be 1-64 characters"),
    (["--redis-cluster"], {}, "concord-server: --redis-cluster: needs --redis-url set to redis:// or rediss://"),
    ([], {"CONCORD_REDIS_CLUSTER": "true", "CONCORD_REDIS_URL": "unix:///tmp/x.sock"},
     "concord-server: CONCORD_REDIS_CLUSTER: invalid value 'true': needs CONCORD_REDIS_URL set to redis://"),
    ([], {"CONCORD_REDIS_URL": "localhost:6379"},
     "concord-server: CONCORD_REDIS_URL: invalid value 'localhost:6379': must start with redis://"),
    (["--chat-max-bytes", "10"], {}, "concord-server: --chat-max-bytes: invalid value '10': --chat-max-bytes (10) "
                                     "must be at least --chat-max-message-size (65536)"),
    ([], {"CONCORD_MAX_MESSAGE_SIZE": "2000"}, "concord-server: CONCORD_MAX_MESSAGE_SIZE: invalid value '2000': "
                                               "--file-chunk-size (262144) must be at least 1024 and at most "
                                               "CONCORD_MAX_MESSAGE_SIZE (2000) - 1024"),
    (["--tls-cert", "server.pem"], {}, "concord-server: --tls-cert: invalid value 'server.pem': needs --tls-key too"),
    (["--queue-retry-backoff", "2h"], {}, "concord-server: --queue-retry-backoff: invalid value '2h': must be 1ms to 1h"),
    (["--listen", "50051"], {}, "concord-server: --listen: invalid value '50051': must be host:port"),
    (["--bogus"], {}, "concord-server: unrecognized arguments: --bogus (see concord-server --help)"),
    (["--auth-tokens", "/nonexistent/tokens.toml"], {},
     "concord-server: --auth-tokens /nonexistent/tokens.toml: no readable file"),
])
def test_a_bad_setting_is_one_line_naming_what_the_user_set(args, env, expected, tmp_path):
    line = one_line_exit_2(start(*args, "--data-dir", str(tmp_path / "data"), env=env))
    assert line.startswith(expected), line
    assert not (tmp_path / "data").exists()


def test_a_bad_token_file_is_one_line(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[tokens]]\ntoken = "short"\ntenant = "acme"\n')
    line = one_line_exit_2(start("--auth-tokens", str(tokens), "--data-dir", str(tmp_path / "data")))
    assert line.startswith(f"concord-server: --auth-tokens {tokens}: token file {tokens}, tokens[0]: ")


def test_help_shows_durations_in_human_units_and_takes_them():
    done = start("--help")
    assert done.returncode == 0
    out = " ".join(done.stdout.split())  # argparse wraps lines
    assert "CONCORD_MAX_TTL] (default: 1d)" in out and "CONCORD_MAX_WAIT] (default: 1h)" in out
    assert "CONCORD_SHUTDOWN_GRACE] (default: 10s)" in out and "CONCORD_FILE_UPLOAD_LEASE] (default: 30s)" in out
    assert "86400" not in out and "3600" not in out
    settings = config.load(["--max-ttl", "2h", "--shutdown-grace", "500ms"], {"CONCORD_MAX_WAIT": "1m30s"})
    assert (settings.max_ttl, settings.shutdown_grace, settings.max_wait) == (7200, 0.5, 90)
    assert config.load(["--max-ttl", "600"], {}).max_ttl == 600  # a bare number is seconds, as before


def test_a_duration_limit_in_an_error_is_in_human_units(client, name):
    """The server's own limit (--max-ttl, 1d by default) as a client sees it."""
    with pytest.raises(concord.InvalidArgument) as err:
        client.lock(name, ttl=2 * 86400).acquire(timeout=0)
    assert "ttl must be between 10ms and 1d" in str(err.value), str(err.value)
