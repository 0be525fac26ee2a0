"""Hypothesis fuzzes every RPC of every Concord service against a live server.

Requests are built from the message descriptors alone (so a new field or RPC is
fuzzed without touching this file): strings with control characters, huge ones and
bytes that are not UTF-8, numbers at their extremes, durations and timestamps out of
range, enum values nobody defined, repeated fields with thousands of entries. The
protobuf runtime refuses to serialize invalid UTF-8, so such values are appended to
the serialized request as raw wire fields (the parser merges them in) and requests go
out through generic byte-level stubs.

Each example checks what the issue asks: only documented status codes, an ErrorInfo
in domain "concord" on every error, a server that still answers SERVING, and no new
Redis key after a request that was refused. The server has a key prefix of its own,
so its keys are exactly the ones under that prefix; blocked waits are capped at one
second (--max-wait) so a refused call has ended before its keys are compared.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import descriptor, message_factory
from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from concord.autocomplete.v1 import autocomplete_pb2
from concord.chat.v1 import chat_pb2
from concord.election.v1 import election_pb2
from concord.files.v1 import files_pb2
from concord.lock.v1 import lock_pb2
from concord.queue.v1 import queue_pb2
from concord.ratelimit.v1 import ratelimit_pb2
from concord.rwlock.v1 import rwlock_pb2
from concord.semaphore.v1 import semaphore_pb2
from support import ServerProcess

MODULES = [lock_pb2, semaphore_pb2, queue_pb2, chat_pb2, autocomplete_pb2, files_pb2, rwlock_pb2, election_pb2,
           ratelimit_pb2]
METHODS: list[descriptor.MethodDescriptor] = [
    m for mod in MODULES for svc in mod.DESCRIPTOR.services_by_name.values() for m in svc.methods
]

C = grpc.StatusCode
# DESIGN.md "Errors and input"; UNKNOWN and INTERNAL never.
DOCUMENTED = {C.OK, C.INVALID_ARGUMENT, C.NOT_FOUND, C.FAILED_PRECONDITION, C.RESOURCE_EXHAUSTED,
              C.UNAVAILABLE, C.DEADLINE_EXCEEDED}
# What the README documents beyond that, per service: CHAT_EXISTS, NOT_A_MEMBER.
DOCUMENTED_FOR = {
    "concord.chat.v1.ChatService": {C.ALREADY_EXISTS, C.PERMISSION_DENIED},
    "concord.files.v1.FileService": {C.PERMISSION_DENIED},
}

CALL_TIMEOUT = 30.0  # generous: the server's own wait cap (1 s) ends blocked calls first
STREAM_WATCHDOG = 15.0  # a server stream that says nothing for this long is a failure
CAUGHT_UP_CUT = 1.0  # how long a caught-up Observe (see _caught_up) is heard before we cut it
MAX_DEPTH = 3
MAX_MESSAGE = 4 * 1024 * 1024  # the server's default --max-message-size

INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1), FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1), FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1), FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1), FD.TYPE_FIXED64: (0, 2**64 - 1),
}


# --- a request built from any message descriptor --------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    edges = [v for v in (lo, hi, lo + 1, hi - 1, -1, 0, 1, 2, 10, 1000, 10_001, 86_400_000, 2**31, 2**53 + 1)
             if lo <= v <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi), st.integers(max(lo, -5), 20))


# Tame values pass validation, and collide across examples (a lock already held, a
# chat that exists), so requests reach Redis; wild ones probe the validation.
tame_text = st.text(alphabet="ab:", min_size=1, max_size=3)
wild_text = st.one_of(
    st.text(max_size=20),  # any code point, control characters included
    st.sampled_from(["", " ", "a\x00b", "\n", "\x7f", "\u0085", "\u2028", "{", "}", "%7B", "*", "é" * 128, "x" * 256,
                     "x" * 257, "\ud7ff", "\U0010ffff"]),
    st.just("y" * 300_000),  # huge
)
invalid_utf8 = st.sampled_from([b"\xff", b"\xc3", b"a\x80b", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf",
                                b"ok" * 10 + b"\xfe"])
tame_blob = st.binary(max_size=16)
wild_blob = st.one_of(st.just(b""), st.just(b"\x1f\x8b" + b"\x00" * 16), st.just(b"\x1f\x8b\x08garbage"),
                      st.just(b"z" * ((1 << 20) + 1)))  # past the task payload cap


@st.composite
def well_known(draw, wild: bool) -> dict:
    """Duration and Timestamp fields: tame ones within a second, wild ones negative or
    past their documented bounds."""
    if not wild:
        return {"seconds": draw(st.integers(0, 1)), "nanos": draw(st.sampled_from([0, 10_000_000, 300_000_000]))}
    seconds = draw(st.one_of(integers(-(2**63), 2**63 - 1), st.integers(-10, 100_000)))
    nanos = draw(st.one_of(st.sampled_from([0, 1, 999_999_999, 1_000_000_000, -1, -(2**31), 2**31 - 1]),
                           st.integers(-(10**9), 10**9)))
    return {"seconds": seconds, "nanos": nanos}


@st.composite
def requests(draw, desc: descriptor.Descriptor, wildness: int, depth: int = 0):
    """(message, extra wire bytes): serialize the message and append the bytes.
    ``wildness`` is the percentage of values drawn wild."""
    msg = message_factory.GetMessageClass(desc)()
    extra = b""
    if desc.full_name in ("google.protobuf.Duration", "google.protobuf.Timestamp"):
        for k, v in draw(well_known(draw(st.integers(0, 99)) < wildness)).items():
            setattr(msg, k, v)
        return msg, extra
    fields = list(desc.fields)
    chosen = draw(st.lists(st.sampled_from(fields), unique=True, max_size=len(fields),
                           min_size=0 if wildness else len(fields) // 2)) if fields else []
    for f in chosen:
        wild = draw(st.integers(0, 99)) < wildness
        value = _value(f, wildness, depth)
        if f.is_repeated:
            count = draw(st.one_of(st.integers(0, 3), st.sampled_from([1001, 10_001])) if wild else st.integers(1, 2))
            if count > 3:  # one drawn value, many times: huge lists without huge examples
                item, raw = draw(value)
                if len(raw if raw is not None else _encoded(f, item)) > 64:
                    count = 4
                if raw is not None:
                    extra += raw * min(count, 64)
                else:
                    _extend(msg, f, [item] * count)
                continue
            for _ in range(count):
                item, raw = draw(value)
                if raw is not None:
                    extra += raw
                else:
                    _extend(msg, f, [item])
        else:
            item, raw = draw(value)
            if raw is not None:
                extra += raw
            elif f.type == FD.TYPE_MESSAGE:
                getattr(msg, f.name).CopyFrom(item)
            else:
                setattr(msg, f.name, item)
    return msg, extra


def _encoded(f: FD, value) -> bytes:
    if f.type == FD.TYPE_MESSAGE:
        return value.SerializeToString()
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")


def _extend(msg, f: FD, values: list) -> None:
    field = getattr(msg, f.name)
    if f.type == FD.TYPE_MESSAGE:
        for v in values:
            field.add().CopyFrom(v)
    else:
        field.extend(values)


@st.composite
def _value(draw, f: FD, wildness: int, depth: int):
    """(value, None) to set on the message, or (None, raw wire bytes for this field)."""
    t = f.type
    if t == FD.TYPE_MESSAGE:
        if depth >= MAX_DEPTH:
            return message_factory.GetMessageClass(f.message_type)(), None
        sub, sub_extra = draw(requests(f.message_type, wildness, depth + 1))
        if sub_extra:  # the sub-message's own invalid strings ride in a merged copy of the field
            return None, _length_delimited(f.number, sub.SerializeToString() + sub_extra)
        return sub, None
    wild = draw(st.integers(0, 99)) < wildness
    if t == FD.TYPE_STRING:
        if wild and draw(st.booleans()):
            return None, _length_delimited(f.number, draw(invalid_utf8))
        return draw(wild_text if wild else tame_text), None
    if t == FD.TYPE_BYTES:
        return draw(wild_blob if wild else tame_blob), None
    if t == FD.TYPE_BOOL:
        return draw(st.booleans()), None
    if t in INT_RANGES:
        return draw(integers(*INT_RANGES[t]) if wild else st.integers(0, 5)), None
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        if not wild:
            return draw(st.sampled_from([0.0, 0.5, 1.0])), None
        return draw(st.one_of(st.floats(allow_nan=True, width=32 if t == FD.TYPE_FLOAT else 64),
                              st.sampled_from([-0.0, float("inf"), float("-inf"), float("nan")]))), None
    if t == FD.TYPE_ENUM:
        known = [v.number for v in f.enum_type.values]
        unknown = st.sampled_from([-1, len(known), 99, 2**31 - 1, -(2**31)])
        return draw(st.one_of(st.sampled_from(known), unknown) if wild else st.sampled_from(known)), None
    raise AssertionError(f"field type {t} of {f.full_name} has no strategy")


def wire(request) -> bytes:
    msg, extra = request
    return msg.SerializeToString() + extra


# --- calling any RPC with bytes ---------------------------------------------------------


class Outcome:
    def __init__(self, code: grpc.StatusCode, call=None, answered: bool = False, quiet: bool = False) -> None:
        # quiet: a stream allowed to say nothing said nothing, and we cut it
        self.code, self.call, self.answered, self.quiet = code, call, answered, quiet


def _identity(b: bytes) -> bytes:
    return b


def invoke(channel: grpc.Channel, method: descriptor.MethodDescriptor, payloads: list[bytes],
           may_wait: bool = False) -> Outcome:
    path = f"/{method.containing_service.full_name}/{method.name}"
    kw = {"request_serializer": _identity, "response_deserializer": _identity}
    if not method.client_streaming and not method.server_streaming:
        try:
            channel.unary_unary(path, **kw)(payloads[0], timeout=CALL_TIMEOUT)
            return Outcome(C.OK, answered=True)
        except grpc.RpcError as err:
            return Outcome(err.code(), err)
    if method.client_streaming and not method.server_streaming:
        try:
            channel.stream_unary(path, **kw)(iter(payloads), timeout=CALL_TIMEOUT)
            return Outcome(C.OK, answered=True)
        except grpc.RpcError as err:
            return Outcome(err.code(), err)
    if method.client_streaming:
        call = channel.stream_stream(path, **kw)(iter(payloads), timeout=CALL_TIMEOUT)
    else:
        call = channel.unary_stream(path, **kw)(payloads[0], timeout=CALL_TIMEOUT)
    return _read_stream(call, until_end=method.client_streaming, may_wait=may_wait)


def _read_stream(call, until_end: bool, may_wait: bool) -> Outcome:
    """Reads a server stream. Bidirectional ones run to their end (the client has
    half-closed, so the server ends them and hands back what they held); others are
    cut after their first message (Hold, Subscribe never end by themselves). One that
    ``may_wait`` is cut after CAUGHT_UP_CUT if it has said nothing by then."""
    stalled = threading.Event()

    def watchdog() -> None:
        stalled.set()
        call.cancel()

    timer = threading.Timer(CAUGHT_UP_CUT if may_wait else STREAM_WATCHDOG, watchdog)
    timer.start()
    answered = False
    try:
        for _ in call:
            answered = True
            if not until_end:
                call.cancel()
                return Outcome(C.OK, answered=True)
        return Outcome(C.OK, answered=answered)
    except grpc.RpcError as err:
        if stalled.is_set() and may_wait:
            return Outcome(err.code(), call, answered, quiet=True)
        assert not stalled.is_set(), f"stream said nothing for {STREAM_WATCHDOG}s"
        return Outcome(err.code(), call, answered)
    finally:
        timer.cancel()


def _caught_up(channel: grpc.Channel, method: descriptor.MethodDescriptor, payload: bytes) -> bool:
    """Whether this is an Observe whose ``after`` is the election's position now: such
    an observer has seen everything, so it rightly says nothing until the next change
    (a leader's TTL may be minutes away). A fresh Observe's first message tells the
    position now. A change in between only makes the fuzzed one speak, which is fine."""
    if method.full_name != "concord.election.v1.ElectionService.Observe":
        return False
    try:
        request = election_pb2.ObserveRequest.FromString(payload)
    except DecodeError:
        return False
    if request.after == 0:  # from now: the state now comes first
        return False
    probe = channel.unary_stream(f"/{method.containing_service.full_name}/{method.name}",
                                 request_serializer=election_pb2.ObserveRequest.SerializeToString,
                                 response_deserializer=election_pb2.ObserveResponse.FromString)
    call = probe(election_pb2.ObserveRequest(election=request.election), timeout=STREAM_WATCHDOG)
    try:
        now = next(iter(call)).position
    except grpc.RpcError:  # a name the server refuses: the fuzzed call is refused too
        return False
    finally:
        call.cancel()
    return now == request.after


# --- the live server and the checks ----------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_server(redis_server, tmp_path_factory) -> Iterator[ServerProcess]:
    prefix = f"fuzz{uuid.uuid4().hex[:8]}"
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", prefix, "--max-wait", "1",
                      "--max-ttl", "600", "--log-level", "WARNING")
    s.start(tmp_path_factory.mktemp("fuzz") / "server.log")
    s.prefix = prefix
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def fuzz_channel(fuzz_server) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(fuzz_server.target) as ch:
        yield ch


@pytest.fixture(scope="module")
def server_keys(fuzz_server, redis_server):
    r = redis_server.client()
    pattern = f"*{fuzz_server.prefix}*"

    def keys() -> set[str]:
        return set(r.scan_iter(match=pattern, count=1000))

    yield keys
    r.close()


# Id counters are never reset, so that an id is never reused: an Upload refused
# after its header was accepted has taken a file number for good. The listing indexes
# (primitives/listing.py) are bookkeeping too: a creator's note rides in the same write
# as its script, so a script's refusal (a semaphore with no stored limit) may leave its
# name there; listings and the index's sampled sweep drop it, so it stays bounded.
COUNTERS = {"file-ids", "chat-ids", "index:lock", "index:sem", "index:queue", "index:chat"}


def resources(keys: set[str]) -> set[str]:
    """The resources (hash tags, prefix dropped: "lock:a") that own these keys.

    A refused call may still move an existing resource along the Redis clock (each
    queue script first makes due tasks ready and expired leases dead), so keys of a
    resource that already existed may appear; a resource that did not exist may not.
    The server's own key spaces (``{<prefix>#processes}``: every process's record,
    rewritten by the server itself every few seconds) count as one resource each."""
    tags = (k[k.index("{") + 1:k.index("}")] for k in keys)
    return {tag.split(":", 1)[1] if ":" in tag else tag[tag.index("#"):] for tag in tags}


@pytest.mark.parametrize("method", METHODS, ids=lambda m: f"{m.containing_service.name}.{m.name}")
@settings(max_examples=15, deadline=None, derandomize=False, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(data=st.data())
def test_fuzzed_requests(method, data, fuzz_server, fuzz_channel, server_keys) -> None:
    count = data.draw(st.integers(1, 3), label="messages") if method.client_streaming else 1
    wildness = data.draw(st.sampled_from([0, 0, 10, 100]), label="wildness")
    payloads = [wire(data.draw(requests(method.input_type, wildness), label=f"request {i}")) for i in range(count)]
    # Past --max-message-size gRPC itself answers RESOURCE_EXHAUSTED, before any Concord code.
    assume(all(len(p) < MAX_MESSAGE for p in payloads))
    before = server_keys()

    outcome = invoke(fuzz_channel, method, payloads, may_wait=_caught_up(fuzz_channel, method, payloads[0]))

    allowed = DOCUMENTED | DOCUMENTED_FOR.get(method.containing_service.full_name, set())
    cut_by_us = outcome.code == C.CANCELLED and (outcome.answered or outcome.quiet)
    assert cut_by_us or outcome.code in allowed, (outcome.code, outcome.call and outcome.call.details(),
                                                  fuzz_server.log_text()[-3000:])
    if outcome.code != C.OK and not cut_by_us:
        status = rpc_status.from_call(outcome.call)
        assert status is not None, f"{outcome.code} without details: {outcome.call.details()}"
        info = error_details_pb2.ErrorInfo()
        assert status.details and status.details[0].Unpack(info), status
        assert info.domain == "concord" and info.reason, info
        if not outcome.answered:  # refused outright: it must have left nothing behind
            new = resources(server_keys()) - resources(before) - COUNTERS
            assert not new, f"{method.full_name} refused with {outcome.code} but created {sorted(new)}"
    assert fuzz_server.health() == health_pb2.HealthCheckResponse.SERVING


def test_a_caught_up_observe_is_heard_out_and_not_taken_for_a_stall(fuzz_server, fuzz_channel) -> None:
    """The case the fuzzer found: an Observe from the position now waits for the next
    change. It is recognised as such (and cut quietly) while one from an older
    position still has to speak."""
    election = f"caught-up-{uuid.uuid4().hex[:6]}"
    campaign = fuzz_channel.unary_unary("/concord.election.v1.ElectionService/Campaign",
                                        request_serializer=election_pb2.CampaignRequest.SerializeToString,
                                        response_deserializer=election_pb2.CampaignResponse.FromString)
    assert campaign(election_pb2.CampaignRequest(election=election, candidate="a", ttl={"seconds": 60}),
                    timeout=CALL_TIMEOUT).elected
    observe = election_pb2.DESCRIPTOR.services_by_name["ElectionService"].methods_by_name["Observe"]
    now = election_pb2.ObserveRequest(election=election, after=1).SerializeToString()
    assert _caught_up(fuzz_channel, observe, now)
    quiet = invoke(fuzz_channel, observe, [now], may_wait=True)
    assert quiet.quiet and not quiet.answered and quiet.code == C.CANCELLED
    older = election_pb2.ObserveRequest(election=election, after=2).SerializeToString()  # past the end: a gap
    assert not _caught_up(fuzz_channel, observe, older)
    assert invoke(fuzz_channel, observe, [older]).answered
