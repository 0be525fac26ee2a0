"""Request field checks shared by every servicer. Each failure is InvalidArgument
naming the field, raised before anything touches Redis.

Names are what people read in listings, logs and metrics, so a name is made of
characters a reader can see: no control characters (Cc), no invisible or formatting
ones (Cf: U+202E RIGHT-TO-LEFT OVERRIDE, U+200B ZERO WIDTH SPACE, U+200D ZERO WIDTH
JOINER, U+FEFF, ...), no surrogates, private-use or unassigned code points (Cs, Co,
Cn) and no line or paragraph separators (Zl, Zp). Otherwise "deploy" and
"deploy\u200b", or a name whose tail an override reverses on screen, would be two
resources that look like one. For the same reason a name neither begins nor ends
with whitespace ("deploy " looks like "deploy"); spaces inside a name, including the
no-break and ideographic spaces of personal names, are fine. Labels (owners,
candidates, dedupe keys, prefixes) follow the character rule but may be empty and
keep their spaces: an autocomplete prefix "Ana " is a real query.
"""

from __future__ import annotations

import json
import re
import unicodedata

from google.protobuf import duration_pb2, timestamp_pb2

from ..durations import human_ms
from ..errors import InvalidArgument

MAX_NAME_BYTES = 256
MIN_TTL_MS = 10  # the shortest lock/semaphore TTL or task lease
MAX_JSON_DEPTH = 32  # nesting of a JSON document a request carries (progress); json.loads recurses
MAX_TIMESTAMP_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z, the end of protobuf's Timestamp range
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# A JSON string (closing quote optional, so an unterminated one is one linear match) or a bracket.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')


def hidden_character(value: str) -> str | None:
    """The first character of ``value`` a reader cannot see (see the module's
    docstring), or None. str.isprintable is false for each of them (and for spaces
    other than U+0020, which are allowed), so a usual name costs one C-speed call."""
    if value.isprintable():
        return None
    return next((ch for ch in value if unicodedata.category(ch) in _HIDDEN), None)


def _text(value: str, field: str, max_bytes: int) -> str:
    if len(value) * 4 > max_bytes and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidArgument(f"{field} is longer than {max_bytes} bytes", field=field)
    hidden = hidden_character(value)
    if hidden is not None:
        kind = "control" if unicodedata.category(hidden) == "Cc" else "invisible, formatting or unassigned"
        raise InvalidArgument(f"{field} must not contain {kind} characters (U+{ord(hidden):04X})", field=field)
    return value


def name(value: str, field: str = "name") -> str:
    """A resource name: non-empty UTF-8 of visible characters, not beginning or
    ending with whitespace, at most 256 bytes."""
    if not value:
        raise InvalidArgument(f"{field} must not be empty", field=field)
    _text(value, field, MAX_NAME_BYTES)
    if value[0].isspace() or value[-1].isspace():
        raise InvalidArgument(f"{field} must not begin or end with whitespace", field=field)
    return value


def usual_names(values: list[str]) -> bool:
    """Whether every value is a usual name (short, printable, no space at either end),
    so valid for ``name``: a few C-speed passes over them all, 10,000 being a normal batch."""
    if values and all(values) and max(map(len, values)) * 4 <= MAX_NAME_BYTES and "".join(values).isprintable():
        lines = "\n".join(values)  # printable names hold no newline, so it marks each one's ends
        return " \n" not in lines and "\n " not in lines and lines[0] != " " and lines[-1] != " "
    return False


def names(values: list[str], field: str) -> list[str]:
    """``name`` on each (usual_names first)."""
    return values if usual_names(values) else [name(n, field) for n in values]


def label(value: str, field: str) -> str:
    """Optional free text such as an owner label: may be empty, else visible
    characters (spaces anywhere) of at most 256 bytes."""
    return _text(value, field, MAX_NAME_BYTES)


def json_document(text: str, field: str, *, max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> str:
    """A JSON document of at most max_bytes and max_depth levels of nesting. The
    depth is counted before parsing: json.loads recurses once per level and a
    document nested a few thousand deep raises RecursionError, not ValueError."""
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidArgument(f"{field} is longer than {max_bytes} bytes", field=field)
    depth = 0
    for token in _JSON_TOKEN.findall(text):
        if token in ("[", "{"):
            depth += 1
            if depth > max_depth:
                raise InvalidArgument(f"{field} is nested more than {max_depth} deep", field=field)
        elif token in ("]", "}"):
            depth -= 1
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidArgument(f"{field} is not a JSON document: {str(exc)[:200]}", field=field) from None
    return text


def timestamp_ms(ts: timestamp_pb2.Timestamp, field: str) -> int:
    """A Timestamp field in ms since the epoch: from 1970 to the end of year 9999,
    nanos within a second (protobuf's own rule; ToMilliseconds raises ValueError past it)."""
    if not 0 <= ts.seconds <= MAX_TIMESTAMP_SECONDS or not 0 <= ts.nanos <= 999_999_999:
        raise InvalidArgument(f"{field} is not a valid time (seconds 0 to {MAX_TIMESTAMP_SECONDS}, "
                              "nanos 0 to 999999999)", field=field)
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def token(value: str, field: str) -> str:
    """An opaque token the server handed out (lease, permit id): short and printable."""
    if not value:
        raise InvalidArgument(f"{field} must not be empty", field=field)
    if len(value) > 128 or not value.isascii() or not value.isprintable() or " " in value:
        raise InvalidArgument(f"{field} is not a token this server issued", field=field)
    return value


def duration_ms(
    message: object, field: str, *, minimum_ms: int, maximum_ms: int, required: bool, label: str | None = None
) -> int:
    """The Duration field ``field`` of ``message`` in whole milliseconds, bounded.
    ``label`` names the field in errors when it is nested (``tasks[3].delay``)."""
    present = message.HasField(field)  # type: ignore[attr-defined]
    d: duration_pb2.Duration = getattr(message, field)
    field = label or field
    if not present:
        if required:
            raise InvalidArgument(f"{field} is required", field=field)
        return 0
    if d.seconds < 0 or d.nanos < 0:
        raise InvalidArgument(f"{field} must not be negative", field=field)
    if d.nanos > 999_999_999:
        raise InvalidArgument(f"{field} is not a valid duration", field=field)
    ms = d.seconds * 1000 + d.nanos // 1_000_000
    if ms < minimum_ms or ms > maximum_ms:
        raise InvalidArgument(f"{field} must be between {human_ms(minimum_ms)} and {human_ms(maximum_ms)}",
                              field=field)
    return ms


class Durations:
    """The server's bounds on the durations a request may ask for, from its settings:
    a TTL or lease between MIN_TTL_MS and --max-ttl, a wait_timeout up to --max-wait."""

    def __init__(self, max_ttl: float, max_wait: float) -> None:
        self.max_ttl_ms = int(max_ttl * 1000)
        self.max_wait_ms = int(max_wait * 1000)

    def ttl(self, message: object, field: str = "ttl") -> int:
        """A required TTL (or lease) field in milliseconds."""
        return duration_ms(message, field, minimum_ms=MIN_TTL_MS, maximum_ms=self.max_ttl_ms, required=True)

    def wait(self, message: object) -> int:
        """The optional ``wait_timeout`` in milliseconds, 0 (try once) when absent."""
        return duration_ms(message, "wait_timeout", minimum_ms=0, maximum_ms=self.max_wait_ms, required=False)


def page(token: str, size: int) -> tuple[str, int]:
    """A listing's page_token (a SCAN cursor the server handed out, "<primary>:<cursor>"
    on a Redis Cluster) and page_size (0 = 100, at most 1000)."""
    found = re.fullmatch(r"(?:[0-9]{1,4}:)?([0-9]{1,20})", token) if token else None
    if token and not (found and int(found[1]) < 2**64):
        raise InvalidArgument("page_token is not one this server issued", field="page_token")
    return token, count(size or 100, "page_size", minimum=1, maximum=1000)


def count(value: int, field: str, *, minimum: int, maximum: int) -> int:
    if value < minimum or value > maximum:
        raise InvalidArgument(f"{field} must be between {minimum} and {maximum}", field=field)
    return value
