"""Request field checks shared by every servicer. Each failure is InvalidArgument
naming the field, raised before anything touches Redis."""

from __future__ import annotations

import re

from google.protobuf import duration_pb2

from ..durations import human_ms
from ..errors import InvalidArgument

MAX_NAME_BYTES = 256
MIN_TTL_MS = 10  # the shortest lock/semaphore TTL or task lease
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _text(value: str, field: str, max_bytes: int) -> str:
    if len(value) * 4 > max_bytes and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidArgument(f"{field} is longer than {max_bytes} bytes", field=field)
    if _CONTROL.search(value):
        raise InvalidArgument(f"{field} must not contain control characters", field=field)
    return value


def name(value: str, field: str = "name") -> str:
    """A resource name: non-empty UTF-8, no control characters, at most 256 bytes."""
    if not value:
        raise InvalidArgument(f"{field} must not be empty", field=field)
    return _text(value, field, MAX_NAME_BYTES)


def label(value: str, field: str) -> str:
    """Optional free text such as an owner label: may be empty, else like a name."""
    return _text(value, field, MAX_NAME_BYTES)


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
