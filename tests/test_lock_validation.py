"""Bad input gets INVALID_ARGUMENT (or the documented code) and writes nothing to Redis."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2

from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc
from support import assert_rejected_and_nothing_written, error_info, prefixed_keys

TTL = duration_pb2.Duration(seconds=5)


def d(seconds: int = 0, nanos: int = 0) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=seconds, nanos=nanos)


@pytest.fixture
def server(validation_server):
    return validation_server


@pytest.fixture
def stub(server):
    with grpc.insecure_channel(server.target) as ch:
        yield lock_pb2_grpc.LockServiceStub(ch)


BAD_NAMES = {
    "empty": "",
    "257 bytes": "a" * 257,
    "258 bytes of 2-byte chars": "é" * 129,
    "newline": "orders\n42",
    "nul": "orders\x0042",
    "del": "orders\x7f",
    "c1 control": "orders\x85",
    # Invisible and direction-changing characters: two names that look alike (issue 30, item 10).
    "right-to-left override U+202E": "invoice\u202etxt.exe",
    "zero width joiner U+200D": "orders\u200d42",
    "byte order mark U+FEFF": "\ufefforders",
    "zero width space U+200B": "orders\u200b",
    "soft hyphen U+00AD": "or\u00adders",
    "line separator U+2028": "orders\u2028",
    "private use U+E000": "orders\ue000",
    "unassigned U+0378": "orders\u0378",
    "leading space": " orders",
    "trailing space": "orders ",
    "only a space": " ",
}

BAD_REQUESTS = {
    **{f"Acquire name {k}": ("Acquire", pb.AcquireRequest(name=v, ttl=TTL), "name") for k, v in BAD_NAMES.items()},
    "Acquire ttl missing": ("Acquire", pb.AcquireRequest(name="n"), "ttl"),
    "Acquire ttl zero": ("Acquire", pb.AcquireRequest(name="n", ttl=d()), "ttl"),
    "Acquire ttl negative": ("Acquire", pb.AcquireRequest(name="n", ttl=d(-5)), "ttl"),
    "Acquire ttl negative nanos": ("Acquire", pb.AcquireRequest(name="n", ttl=d(0, -5)), "ttl"),
    "Acquire ttl below 10ms": ("Acquire", pb.AcquireRequest(name="n", ttl=d(0, 5_000_000)), "ttl"),
    "Acquire ttl above max": ("Acquire", pb.AcquireRequest(name="n", ttl=d(3601)), "ttl"),
    "Acquire ttl huge": ("Acquire", pb.AcquireRequest(name="n", ttl=d(10**11)), "ttl"),
    "Acquire wait negative": ("Acquire", pb.AcquireRequest(name="n", ttl=TTL, wait_timeout=d(-1)), "wait_timeout"),
    "Acquire wait above max": ("Acquire", pb.AcquireRequest(name="n", ttl=TTL, wait_timeout=d(61)), "wait_timeout"),
    "Acquire owner control char": ("Acquire", pb.AcquireRequest(name="n", ttl=TTL, owner="bad\towner"), "owner"),
    "Acquire owner direction override": ("Acquire", pb.AcquireRequest(name="n", ttl=TTL, owner="ad\u202enim"), "owner"),
    "Acquire owner too long": ("Acquire", pb.AcquireRequest(name="n", ttl=TTL, owner="o" * 300), "owner"),
    "Hold name empty": ("Hold", pb.HoldRequest(ttl=TTL), "name"),
    "Hold ttl missing": ("Hold", pb.HoldRequest(name="n"), "ttl"),
    "Release lease empty": ("Release", pb.ReleaseRequest(name="n"), "lease"),
    "Release lease too long": ("Release", pb.ReleaseRequest(name="n", lease="a" * 200), "lease"),
    "Release lease not printable": ("Release", pb.ReleaseRequest(name="n", lease="ab\x01cd"), "lease"),
    "Release name bad": ("Release", pb.ReleaseRequest(name="x\n", lease="a" * 32), "name"),
    "Refresh ttl missing": ("Refresh", pb.RefreshRequest(name="n", lease="a" * 32), "ttl"),
    "Refresh ttl negative": ("Refresh", pb.RefreshRequest(name="n", lease="a" * 32, ttl=d(-1)), "ttl"),
    "Describe name empty": ("Describe", pb.DescribeRequest(), "name"),
}


def call(stub, method, request):
    result = getattr(stub, method)(request, timeout=10)
    return list(result) if method == "Hold" else result


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=str)
def test_bad_input_is_invalid_argument_and_writes_nothing(stub, redis_sync, case):
    method, request, field = BAD_REQUESTS[case]
    assert_rejected_and_nothing_written(lambda: call(stub, method, request), redis_sync, field)


@pytest.mark.parametrize("method", ["Release", "Refresh"])
def test_unknown_lease_is_lock_not_held_and_writes_nothing(stub, redis_sync, method):
    before = prefixed_keys(redis_sync)
    request = getattr(pb, f"{method}Request")(name="never-taken", lease="0123456789abcdef" * 2)
    if method == "Refresh":
        request.ttl.CopyFrom(TTL)
    with pytest.raises(grpc.RpcError) as err:
        call(stub, method, request)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(err.value).reason == "LOCK_NOT_HELD"
    assert prefixed_keys(redis_sync) <= before


def test_names_up_to_the_limit_and_with_braces_work(stub):
    for name in ("a" * 256, "é" * 128, "{orders}:42", "}{", "100%", "名前🔒", "a b", "Ana\u00a0Lima", "山田\u3000太郎",
                 "e\u0301", "🇩🇪"):
        resp = stub.Acquire(pb.AcquireRequest(name=name, ttl=TTL), timeout=10)
        assert resp.acquired, name
        stub.Release(pb.ReleaseRequest(name=name, lease=resp.lease), timeout=10)


@pytest.mark.parametrize("method", ["Acquire", "Release", "Refresh", "Describe", "Hold"])
def test_requests_that_do_not_parse_are_invalid_argument(server, redis_sync, method):
    before = prefixed_keys(redis_sync)
    with grpc.insecure_channel(server.target) as ch:
        raw = (ch.unary_stream if method == "Hold" else ch.unary_unary)(
            f"/concord.lock.v1.LockService/{method}", request_serializer=lambda b: b, response_deserializer=lambda b: b)
        not_utf8 = b"\x0a\x02\xff\xfe" + b"\x12\x02\x08\x05"  # name: bytes that are not UTF-8; ttl: 5 s
        with pytest.raises(grpc.RpcError) as err:
            result = raw(not_utf8, timeout=10)
            list(result) if method == "Hold" else result
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert error_info(err.value).reason == "INVALID_ARGUMENT"
    assert prefixed_keys(redis_sync) <= before
