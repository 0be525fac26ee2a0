"""Log set-up: ``--log-format text`` (one readable line per record) or ``json``
(one JSON object per line, for log collectors: no multi-line tracebacks to
reassemble)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

TEXT_FORMAT = "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """time (UTC, ISO 8601), level, logger, message, process, and exception (the
    formatted traceback) when the record carries one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str, fmt: str) -> None:
    """Configures the root logger once per process (a second call changes nothing)."""
    root = logging.getLogger()
    if any(getattr(h, "_concord", False) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler._concord = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
