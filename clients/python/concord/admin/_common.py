"""What every kind of `concord` command shares: the calls, the output (tables,
``--json``) and durations; the one-line errors are main's (__init__.py)."""

from __future__ import annotations

import argparse
import base64
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ..client import Client


class Failed(Exception):
    """An error worth one line to the operator (exit code 1)."""


_INT64 = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
          FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64}


def _dict(message: Any) -> dict[str, Any]:
    """A message as JSON-ready data. protobuf writes 64-bit integers as strings
    ("fencing_token": "7") and 32-bit ones as numbers ("waiters": 0); every integer
    here is a number."""
    d = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                  always_print_fields_with_no_presence=True)
    return _int64_numbers(message.DESCRIPTOR, d)


def _int64_numbers(descriptor: Descriptor, d: dict[str, Any]) -> dict[str, Any]:
    def fix(field: FieldDescriptor, value: Any) -> Any:
        if field.type in _INT64:
            return int(value)
        if field.message_type is not None and not field.message_type.full_name.startswith("google.protobuf."):
            return _int64_numbers(field.message_type, value)
        return value

    for f in descriptor.fields:
        if f.name not in d:
            continue
        value = d[f.name]
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            value_field = f.message_type.fields_by_name["value"]
            d[f.name] = {k: fix(value_field, v) for k, v in value.items()}
        elif isinstance(value, list):  # a repeated field
            d[f.name] = [fix(f, v) for v in value]
        else:
            d[f.name] = fix(f, value)
    return d


_JSON_DURATION = re.compile(r"-?\d+(?:\.\d+)?s")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
UNLIMITED = "unlimited"  # a retention option's value for "no limit", as `queue policy` shows it


def human_duration(seconds: float) -> str:
    """29.473 -> 29.5s, 0.25 -> 250ms, 3723 -> 1h2m3s, 86400 -> 1d."""
    if seconds < 0:
        return "-" + human_duration(-seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{round(seconds, 1):g}s"
    rest, parts = round(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def parse_duration(text: str) -> float:
    """Seconds in what human_duration writes: "90", "90s", "250ms", "1h30m", "1.5h", "7d"."""
    text = text.strip().lower()
    if text and not _DURATION_PART.sub("", text):
        return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    return _seconds(text, "a duration (such as 90s, 250ms, 1h30m, 7d)")


def _seconds(text: str, what: str = "a number of seconds") -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def _cell(value: Any) -> str:
    """A table cell: durations (protobuf JSON "29.473s") in human units."""
    text = str(value)
    return human_duration(float(text[:-1])) if _JSON_DURATION.fullmatch(text) else text


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def _fields(pairs: Sequence[tuple[str, str]]) -> str:
    """One "name  value" line each, the values aligned (a value's further lines too):
    for one thing with many fields."""
    width = max(len(name) for name, _ in pairs)
    indent = "\n" + " " * (width + 2)
    return "\n".join(f"{name.ljust(width)}  {indent.join(value.splitlines())}".rstrip() for name, value in pairs)


_SHOWN_BYTES = 200  # of a payload or result in a table; --json has them whole


def _bytes_text(data: bytes) -> str:
    """A payload or result for a human: its text when it is UTF-8 (JSON included),
    quoted when it spans lines, else (binary) its size and base64; long ones cut."""
    if not data:
        return "(empty)"
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = None
    if text is not None and not text.isprintable():
        printable = text.replace("\n", "").replace("\r", "").replace("\t", "").isprintable()
        text = json.dumps(text, ensure_ascii=False) if printable else None
    if text is None:
        text = f"{len(data)} bytes, base64 {base64.b64encode(data[:_SHOWN_BYTES]).decode()}"
    return text if len(text) <= _SHOWN_BYTES else f"{text[:_SHOWN_BYTES]}… ({len(data)} bytes; --json for all)"


def _time(message: Any, name: str) -> str:
    return getattr(message, name).ToJsonString() if message.HasField(name) else ""


def _age(message: Any, name: str, unset: str = UNLIMITED) -> str:
    """A Duration field for a table: human units, ``unset`` when absent or zero."""
    nanos = getattr(message, name).ToNanoseconds() if message.HasField(name) else 0
    return human_duration(nanos / 1e9) if nanos else unset


def _confirm(prompt: str) -> bool:
    if not sys.stdin.isatty():
        print(prompt, end="", file=sys.stderr, flush=True)
    try:
        answer = input(prompt if sys.stdin.isatty() else "")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


Command = Callable[..., argparse.ArgumentParser]  # parser()'s command(kind, name, handler, help, ...)


class Base:
    """The calls and the output every kind's commands use (Admin mixes them in)."""

    def __init__(self, client: Client, as_json: bool, out: Any = sys.stdout) -> None:
        self.client, self.as_json, self.out = client, as_json, out

    def call(self, service: str, method: str, request: Any) -> Any:
        """One try of ``method`` of ``service`` (a proto package: "lock", "queue", ...)."""
        return self.client._service(service).call(method, request)

    def emit(self, data: Any, text: str) -> None:
        print(json.dumps(data, ensure_ascii=False) if self.as_json else text, file=self.out, flush=True)

    def names(self, service: str, method: str, request_type: Any) -> list[str]:
        """Every page of a List* RPC; a SCAN may repeat a name, so they are deduplicated."""
        names: set[str] = set()
        token = ""
        while True:
            page = self.call(service, method, request_type(page_token=token, page_size=1000))
            names.update(page.names)
            token = page.next_page_token
            if not token:
                return sorted(names)

    def entries(self, service: str, method: str, request_type: Any, field: str, key: str) -> list[Any]:
        """Every page of a List* RPC whose entries are summaries (ListReadWriteLocks,
        ListElections, ListIndexes, ListFileGroups, ListLimits), one per name (the last seen), by name."""
        found: dict[str, Any] = {}
        token = ""
        while True:
            page = self.call(service, method, request_type(page_token=token, page_size=1000))
            found.update((getattr(e, key), e) for e in getattr(page, field))
            token = page.next_page_token
            if not token:
                return [found[k] for k in sorted(found)]

    def list_names(self, kind: str, service: str, method: str, request_type: Any) -> None:
        names = self.names(service, method, request_type)
        self.emit(names, "\n".join(names) if names else f"(no {kind})")
