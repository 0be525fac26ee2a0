"""Conversions between protobuf time types and the primitives' milliseconds, the
wait budget of a blocking call, and a List RPC's page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from . import validation as v

R = TypeVar("R")


def timestamp(ms: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration(ms: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def wait_budget_ms(requested_ms: int, context: grpc.aio.ServicerContext) -> int:
    """The wait a blocking call may spend: its own timeout, cut short so that it
    answers before the caller's gRPC deadline instead of being cut off by it."""
    remaining = context.time_remaining()
    if remaining is None:
        return requested_ms
    margin = min(0.05, remaining * 0.1)
    return max(0, min(requested_ms, int((remaining - margin) * 1000)))


async def name_page(names: Callable[[str, int], Awaitable[tuple[list[str], str]]], request: Any,
                    response: Callable[..., R]) -> R:
    """A List RPC's reply: one page of the primitive's ``names(page_token, count)``."""
    found, next_token = await names(*v.page(request.page_token, request.page_size))
    return response(names=found, next_page_token=next_token)
