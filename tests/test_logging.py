"""--log-format json: every line a server writes is one JSON object."""

from __future__ import annotations

import json
import logging
import signal

from concord_server.logs import JsonFormatter
from support import ServerProcess, wait_until


def test_json_formatter_carries_the_exception():
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        record = logging.getLogger("concord.test").makeRecord(
            "concord.test", logging.ERROR, __file__, 1, "failed: %s", ("x",), exc_info=__import__("sys").exc_info())
    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "ERROR" and entry["logger"] == "concord.test" and entry["message"] == "failed: x"
    assert "ValueError: boom" in entry["exception"] and "Traceback" in entry["exception"]
    assert entry["time"].endswith("+00:00")


def test_server_logs_json_lines(redis_server, tmp_path):
    server = ServerProcess("--redis-url", redis_server.url, "--log-format", "json", "--log-level", "INFO")
    server.start(tmp_path / "server.log")
    wait_until(lambda: "serving on" in server.log_text(), message="the start-up line")
    server.signal(signal.SIGTERM)
    assert server.stop() == 0
    lines = [line for line in server.log_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line parses
    assert any(e["logger"] == "concord_server.app" and "serving on" in e["message"] for e in entries)
    assert any("shutting down" in e["message"] for e in entries)
    assert all({"time", "level", "logger", "message"} <= e.keys() for e in entries)
