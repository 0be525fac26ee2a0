"""Seconds <-> protobuf time types."""

from __future__ import annotations

from datetime import datetime, timezone

from google.protobuf import duration_pb2, timestamp_pb2


def duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(round(seconds * 1e9))
    return d


def seconds(d: duration_pb2.Duration) -> float:
    return d.ToNanoseconds() / 1e9


def when(ts: timestamp_pb2.Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=timezone.utc)
