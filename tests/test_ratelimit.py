"""Rate limits (primitives/ratelimit.py, lua/ratelimit_check.lua): each limiter's
decisions on a controlled clock, first as a table of cases (redis-cell's style), then
against a reference model over random traffic (hypothesis), then GCRA's bound over
every window; and the service end to end through a real server: stored limits and
mismatches, CheckMany's all or none, peeks, drains, resets, idle keys expiring, bad
input, and CheckMany across the slots of a Redis Cluster."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf import duration_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from concord.ratelimit.v1 import ratelimit_pb2 as pb
from concord.ratelimit.v1 import ratelimit_pb2_grpc
from concord_server.keys import KeySpace
from concord_server.errors import RateLimitMismatch
from concord_server.primitives.ratelimit import Algorithm, Check, Limit, RateLimits
from concord_server.store.autopipeline import AutoPipeline
from concord_server.store.link import Endpoint
from support import async_wait_until, error_info, wait_until

GCRA, BUCKET, LOG, WINDOW, FIXED, CONC = (Algorithm.GCRA, Algorithm.TOKEN_BUCKET, Algorithm.SLIDING_LOG,
                                          Algorithm.SLIDING_WINDOW, Algorithm.FIXED_WINDOW, Algorithm.CONCURRENCY)
T0 = 1_000_000_000_000  # us: a controlled clock, at a whole period of every limit below


class Clock:
    def __init__(self) -> None:
        self.us = T0

    def __call__(self) -> int:
        return self.us

    def at(self, ms: float) -> None:
        self.us = T0 + int(ms * 1000)


@pytest.fixture
async def limits(redis_server):
    pipe = AutoPipeline(Endpoint.from_url(redis_server.url))
    clock = Clock()
    yield RateLimits(pipe, KeySpace("rltest"), clock_us=clock), clock
    await pipe.aclose()


# ------------------------------------------------------------------ table of cases

# (ms since T0, hits, allowed, remaining, retry_after ms): rate 3 per 1000 ms, burst 3.
CASES = {
    GCRA: [(0, 1, True, 2, 0), (0, 2, True, 0, 0), (0, 1, False, 0, 334), (333, 0, True, 0, 0),
           (334, 1, True, 0, 0), (334, 1, False, 0, 333), (1000, 2, True, 0, 0), (2000, 3, True, 0, 0),
           (2000, 4, False, 0, -1)],
    BUCKET: [(0, 1, True, 2, 0), (0, 2, True, 0, 0), (0, 1, False, 0, 334), (334, 1, True, 0, 0),
             (334, 1, False, 0, 333), (2000, 3, True, 0, 0), (2000, 4, False, 0, -1)],
    LOG: [(0, 1, True, 2, 0), (100, 2, True, 0, 0), (500, 1, False, 0, 500), (1000, 1, True, 0, 0),
          (1050, 2, False, 0, 50), (1100, 2, True, 0, 0), (1100, 4, False, 0, -1)],
    # Last period's count weighted by the share of it the window still covers.
    WINDOW: [(0, 3, True, 0, 0), (500, 1, False, 0, 834), (1000, 1, False, 0, 334), (1500, 1, True, 0, 0),
             (1500, 1, False, 0, 167), (1500, 4, False, 0, -1)],
    FIXED: [(0, 2, True, 1, 0), (999, 1, True, 0, 0), (999, 1, False, 0, 1), (1000, 3, True, 0, 0),
            (1500, 1, False, 0, 500), (1500, 4, False, 0, -1)],
    # Units held at once, each call's for one period unless released (see the release test).
    CONC: [(0, 1, True, 2, 0), (400, 2, True, 0, 0), (500, 1, False, 0, 500), (500, 0, True, 0, 0),
           (1000, 1, True, 0, 0), (1400, 3, False, 2, 600), (1400, 4, False, 2, -1)],
}


# The clock is the test's, but keys expire on Redis's: a step more than a window's
# rest late in real time (a loaded machine) finds its counter gone. Run alone (make test).
@pytest.mark.serial
@pytest.mark.parametrize("algorithm", list(CASES), ids=[a.name for a in CASES])
async def test_each_limiter_decides_its_table_of_cases(limits, name, algorithm):
    rl, clock = limits
    limit = Limit.of(algorithm, 3, 1000, 0, False)
    for at, hits, allowed, remaining, retry in CASES[algorithm]:
        clock.at(at)
        d = await rl.check(name, limit, hits)
        assert (d.allowed, d.remaining, d.retry_ms) == (allowed, remaining, retry), (at, hits, d)


async def test_drain_over_limit_takes_what_is_left_when_refused(limits, name):
    rl, clock = limits
    limit = Limit.of(GCRA, 10, 1000, 0, drain=True)
    assert (await rl.check(name, limit, 6)).remaining == 4
    refused = await rl.check(name, limit, 5)
    assert not refused.allowed and refused.remaining == 0
    clock.at(100)  # one unit back, not the four a plain refusal would have left
    d = await rl.check(name, limit, 2)
    assert not d.allowed and d.retry_ms == 100


async def test_a_concurrency_permit_holds_its_units_until_released_or_its_period_ends(limits, name):
    rl, clock = limits
    limit = Limit.of(CONC, 3, 1000, 0, False)
    first = await rl.check(name, limit, 2)
    second = await rl.check(name, limit, 1)
    assert first.permit and second.permit and first.permit != second.permit
    assert not (await rl.check(name, limit, 1)).allowed
    assert await rl.release(name, first.permit)
    assert not await rl.release(name, first.permit)  # once
    assert (await rl.check(name, limit, 0)).remaining == 2
    clock.at(1000)  # the second's holder never released it: its period ended
    assert not await rl.release(name, second.permit)
    assert (await rl.check(name, limit, 0)).remaining == 3
    refused = await rl.check_many([Check(name, limit, 3), Check(f"{name}:b", limit, 4)], all_or_none=True)
    assert not refused[0] and not refused[1][0].permit  # all or none: no permit was kept
    assert (await rl.check(name, limit, 0)).remaining == 3


async def test_a_peek_takes_nothing_and_reset_makes_a_key_full(limits, name):
    rl, _ = limits
    limit = Limit.of(FIXED, 5, 1000, 0, False)
    assert (await rl.check(name, limit, 4)).remaining == 1
    for _ in range(3):
        assert (await rl.check(name, limit, 0)).remaining == 1
    await rl.reset(name)
    assert (await rl.check(name, limit, 0)).remaining == 5


# ------------------------------------------------------------------ reference model


@dataclass
class Model:
    """Each limiter as the docs state it, in Python floats (the script's doubles)."""

    limit: Limit
    tat: float = 0.0
    tokens: float | None = None
    at: float = 0.0
    log: list[float] = field(default_factory=list)
    w: int | None = None
    c: int = 0
    p: int = 0
    permits: list[tuple[float, int]] = field(default_factory=list)  # (expiry, units)

    def check(self, now: float, hits: int) -> tuple[bool, int, int]:
        L = self.limit
        if L.algorithm is CONC:
            self.permits = sorted(p for p in self.permits if p[0] > now)
            held = sum(units for _, units in self.permits)
            if hits > L.rate:
                return False, -1, L.rate - held
            if held + hits <= L.rate:
                if hits:
                    self.permits.append((now + L.period_ms, hits))
                return True, 0, L.rate - held - hits
            return False, max(1, math.ceil(self.permits[0][0] - now)), L.rate - held
        if L.algorithm in (GCRA, BUCKET):
            per = L.period_ms / L.rate
            if L.algorithm is GCRA:
                tat = max(self.tat, now)

                def left(after: float) -> int:
                    return max(0, math.floor((per * L.burst - (after - now)) / per + 1e-9))

                if hits > L.burst:
                    return False, -1, left(tat)
                if tat + hits * per - per * L.burst <= now:
                    if hits:
                        self.tat = float("%.3f" % (tat + hits * per))
                    return True, 0, left(tat + hits * per)
                return False, math.ceil(tat + hits * per - per * L.burst - now), left(tat)
            rate = L.rate / L.period_ms
            tokens = L.burst if self.tokens is None else min(L.burst, self.tokens + (now - self.at) * rate)
            if hits > L.burst:
                return False, -1, math.floor(tokens + 1e-9)
            if tokens >= hits:
                if hits:
                    self.tokens, self.at = float("%.6f" % (tokens - hits)), float("%.3f" % now)
                return True, 0, math.floor(tokens - hits + 1e-9)
            return False, math.ceil((hits - tokens) / rate), math.floor(tokens + 1e-9)
        if L.algorithm is LOG:
            live = sorted(t for t in self.log if t > now - L.period_ms)
            if hits > L.rate:
                return False, -1, L.rate - len(live)
            if len(live) + hits <= L.rate:
                self.log = live + [now] * hits
                return True, 0, L.rate - len(live) - hits
            return False, math.ceil(live[len(live) + hits - L.rate - 1] + L.period_ms - now), L.rate - len(live)
        index = math.floor(now / L.period_ms)
        c, p = 0, 0  # a period before the last: nothing counts
        if self.w == index:
            c, p = self.c, self.p
        elif self.w == index - 1:
            c, p = 0, self.c
        if L.algorithm is FIXED:
            if hits > L.rate:
                return False, -1, L.rate - c
            if c + hits <= L.rate:
                if hits:
                    self.w, self.c = index, c + hits
                return True, 0, L.rate - c - hits
            return False, math.ceil((index + 1) * L.period_ms - now), L.rate - c
        elapsed = now - index * L.period_ms
        estimate = p * ((L.period_ms - elapsed) / L.period_ms) + c
        if hits > L.rate:
            return False, -1, max(0, math.floor(L.rate - estimate + 1e-9))
        if estimate + hits <= L.rate + 1e-9:
            if hits:
                self.w, self.c, self.p = index, c + hits, p
            return True, 0, max(0, math.floor(L.rate - estimate - hits + 1e-9))
        if c + hits <= L.rate and p > 0:
            retry = L.period_ms * (1 - (L.rate - c - hits) / p) - elapsed
        else:
            into = L.period_ms * (1 - (L.rate - hits) / c) if c > 0 else 0
            retry = (L.period_ms - elapsed) + max(0, into)
        return False, math.ceil(retry), max(0, math.floor(L.rate - estimate + 1e-9))


TRAFFIC = st.lists(st.tuples(st.integers(0, 700), st.integers(0, 4)), min_size=1, max_size=40)


@pytest.mark.parametrize("algorithm", list(CASES), ids=[a.name for a in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(traffic=TRAFFIC, rate=st.integers(1, 6), period=st.sampled_from([100, 250, 1000]), burst=st.integers(0, 6))
async def test_each_limiter_matches_its_model_through_random_traffic(limits, algorithm, traffic, rate, period, burst):
    rl, clock = limits
    limit = Limit.of(algorithm, rate, period, burst if algorithm in (GCRA, BUCKET) else 0, False)
    key = f"model-{algorithm.name}-{rate}-{period}-{burst}-{hash(tuple(traffic))}"
    await rl.reset(key)
    model = Model(limit)
    now = 0
    for step, hits in traffic:
        now += step
        clock.at(now)
        d = await rl.check(key, limit, hits)
        allowed, retry, remaining = model.check(T0 / 1000 + now, hits)
        assert (d.allowed, d.retry_ms, d.remaining) == (allowed, retry, remaining), (now, hits, d)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(traffic=st.lists(st.tuples(st.integers(0, 300), st.integers(1, 3)), min_size=5, max_size=60),
       rate=st.integers(1, 20), burst=st.integers(0, 10))
async def test_gcra_lets_at_most_burst_plus_rate_times_the_window_pass_in_any_window(limits, traffic, rate, burst):
    rl, clock = limits
    limit = Limit.of(GCRA, rate, 1000, burst, False)
    key = f"bound-{rate}-{burst}-{hash(tuple(traffic))}"
    await rl.reset(key)
    passed: list[tuple[float, int]] = []
    now = 0
    for step, hits in traffic:
        now += step
        clock.at(now)
        if (await rl.check(key, limit, hits)).allowed:
            passed.append((now, hits))
    for i, (start, _) in enumerate(passed):
        for end, _ in passed[i:]:
            inside = sum(h for t, h in passed if start <= t <= end)
            assert inside <= limit.burst + rate * (end - start) / 1000 + 1e-6, (start, end, inside)


# ------------------------------------------------------------------ the service


def _d(ms: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _limit(algorithm: int = 0, rate: int = 5, period_ms: int = 1000, burst: int = 0, drain: bool = False) -> pb.Limit:
    return pb.Limit(algorithm=algorithm, rate=rate, period=_d(period_ms), burst=burst, drain_over_limit=drain)


@pytest.fixture
def stub(concord_server):
    with grpc.insecure_channel(concord_server.target) as channel:
        yield ratelimit_pb2_grpc.RateLimitServiceStub(channel)


def _fails(call, code: grpc.StatusCode, reason: str) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, err.value.details()
    assert error_info(err.value).reason == reason, err.value.details()
    return err.value


def test_check_takes_hits_and_says_how_long_to_wait(stub, name):
    got = [stub.Check(pb.CheckRequest(key=name, limit=_limit(rate=2, period_ms=60_000), hits=1), timeout=10)
           for _ in range(3)]
    assert [g.allowed for g in got] == [True, True, False]
    assert (got[0].remaining, got[1].remaining, got[0].limit, got[0].burst) == (1, 0, 2, 2)
    assert 29_000 <= got[2].retry_after.seconds * 1000 + got[2].retry_after.nanos // 1_000_000 <= 30_000
    assert got[2].reset_after.seconds >= 59


def test_a_check_many_refused_for_one_check_s_missing_or_disagreeing_limit_takes_nothing(stub, name):
    """The whole call is refused, so no check of it may take hits (the fuzz suite found
    the checks before the refused one recorded theirs)."""
    first, unset, other = f"{name}:a", f"{name}:b", f"{name}:c"
    stub.SetLimit(pb.SetLimitRequest(key=other, limit=_limit(rate=5)), timeout=10)
    for refused, code, reason in (
            (pb.CheckRequest(key=unset, hits=1), grpc.StatusCode.NOT_FOUND, "RATE_LIMIT_NOT_FOUND"),
            (pb.CheckRequest(key=other, limit=_limit(rate=4), hits=1), grpc.StatusCode.FAILED_PRECONDITION,
             "RATE_LIMIT_MISMATCH")):
        for all_or_none in (False, True):
            checks = [pb.CheckRequest(key=first, limit=_limit(rate=2, period_ms=60_000), hits=1), refused]
            _fails(lambda: stub.CheckMany(pb.CheckManyRequest(checks=checks, all_or_none=all_or_none), timeout=10),
                   code, reason)
    got = stub.Check(pb.CheckRequest(key=first, limit=_limit(rate=2, period_ms=60_000), hits=0), timeout=10)
    assert got.remaining == 2  # nothing was taken by the four refused calls
    assert stub.Check(pb.CheckRequest(key=other, hits=0), timeout=10).remaining == 5


def test_a_stored_limit_is_changed_only_by_set_limit(stub, name):
    _fails(lambda: stub.Check(pb.CheckRequest(key=name, hits=1), timeout=10), grpc.StatusCode.NOT_FOUND,
           "RATE_LIMIT_NOT_FOUND")
    _fails(lambda: stub.GetLimit(pb.GetLimitRequest(key=name), timeout=10), grpc.StatusCode.NOT_FOUND,
           "RATE_LIMIT_NOT_FOUND")
    first = stub.SetLimit(pb.SetLimitRequest(key=name, limit=_limit(rate=3)), timeout=10)
    assert not first.HasField("previous")
    assert stub.GetLimit(pb.GetLimitRequest(key=name), timeout=10).limit.rate == 3
    assert stub.Check(pb.CheckRequest(key=name, hits=1), timeout=10).remaining == 2  # the stored limit
    assert stub.Check(pb.CheckRequest(key=name, limit=_limit(rate=3), hits=1), timeout=10).remaining == 1
    err = _fails(lambda: stub.Check(pb.CheckRequest(key=name, limit=_limit(rate=4), hits=1), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION, "RATE_LIMIT_MISMATCH")
    assert error_info(err).metadata["rate"] == "3"
    assert stub.Check(pb.CheckRequest(key=name, hits=0), timeout=10).remaining == 1  # the mismatch took nothing
    again = stub.SetLimit(pb.SetLimitRequest(key=name, limit=_limit(rate=4)), timeout=10)
    assert again.previous.rate == 3
    assert stub.Check(pb.CheckRequest(key=name, limit=_limit(rate=4), hits=1), timeout=10).allowed


def test_check_many_all_or_none_charges_nothing_when_one_refuses(stub, name):
    tight, loose = f"{name}-tight", f"{name}-loose"
    both = [pb.CheckRequest(key=loose, limit=_limit(rate=10, period_ms=60_000), hits=2),
            pb.CheckRequest(key=tight, limit=_limit(rate=1, period_ms=60_000), hits=1)]
    first = stub.CheckMany(pb.CheckManyRequest(checks=both, all_or_none=True), timeout=10)
    assert first.allowed and [r.remaining for r in first.results] == [8, 0]
    second = stub.CheckMany(pb.CheckManyRequest(checks=both, all_or_none=True), timeout=10)
    assert not second.allowed and [r.allowed for r in second.results] == [True, False]
    assert stub.Check(pb.CheckRequest(key=loose, limit=_limit(rate=10, period_ms=60_000)), timeout=10).remaining == 8
    each = stub.CheckMany(pb.CheckManyRequest(checks=both), timeout=10)
    assert not each.allowed and [r.allowed for r in each.results] == [True, False]
    assert each.results[0].remaining == 6


def test_a_key_s_state_expires_once_it_is_full_again(stub, name, redis_sync):
    stub.Check(pb.CheckRequest(key=name, limit=_limit(rate=10, period_ms=2000), hits=4), timeout=10)
    keys = KeySpace("concord").ratelimit(name)
    assert 700 <= redis_sync.pttl(keys.gcra) <= 800  # 4 units back at 5 a second
    stub.Reset(pb.ResetRequest(key=name), timeout=10)
    assert not redis_sync.exists(keys.gcra)


@pytest.mark.parametrize("limit,field", [
    (_limit(rate=0), "limit.rate"),
    (_limit(rate=10**10), "limit.rate"),
    (_limit(period_ms=0), "limit.period"),
    (_limit(period_ms=90_000_000), "limit.period"),
    (_limit(burst=10**10), "limit.burst"),
    (_limit(algorithm=9), "limit.algorithm"),
    (_limit(algorithm=5, burst=2), "limit.burst"),
    (_limit(algorithm=3, rate=200_000), "limit.rate"),
    (_limit(algorithm=6, burst=2), "limit.burst"),
    (_limit(algorithm=6, drain=True), "limit.drain_over_limit"),
])
def test_bad_limits_are_invalid_argument_and_change_nothing(stub, name, limit, field):
    err = _fails(lambda: stub.Check(pb.CheckRequest(key=name, limit=limit, hits=1), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert error_info(err).metadata.get("field", "").split(".")[-1] == field.split(".")[-1], err.details()
    _fails(lambda: stub.GetLimit(pb.GetLimitRequest(key=name), timeout=10), grpc.StatusCode.NOT_FOUND,
           "RATE_LIMIT_NOT_FOUND")


def test_bad_requests_are_invalid_argument(stub, name):
    _fails(lambda: stub.Check(pb.CheckRequest(key="", limit=_limit(), hits=1), timeout=10),
           grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    _fails(lambda: stub.Check(pb.CheckRequest(key=name, limit=_limit(), hits=2 * 10**9), timeout=10),
           grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    _fails(lambda: stub.CheckMany(pb.CheckManyRequest(), timeout=10), grpc.StatusCode.INVALID_ARGUMENT,
           "INVALID_ARGUMENT")
    _fails(lambda: stub.SetLimit(pb.SetLimitRequest(key=name), timeout=10), grpc.StatusCode.INVALID_ARGUMENT,
           "INVALID_ARGUMENT")


async def test_check_many_across_cluster_slots_gives_back_what_an_earlier_slot_took(redis_cluster, name):
    """On a Redis Cluster a script touches one slot, so CheckMany decides slot after
    slot; with all_or_none a later slot's refusal gives the earlier slots' hits back."""
    from concord_server.primitives.ratelimit import Check
    from concord_server.store.client import connect_cluster
    from concord_server.store.cluster import ClusterCommands

    slot_map = connect_cluster(redis_cluster.url, 4)
    commands = ClusterCommands(slot_map, Endpoint.from_url(redis_cluster.url))
    try:
        rl = RateLimits(commands, KeySpace("rltest"), cluster=True)
        keys = [f"{name}-{i}" for i in range(12)]  # several slots among them
        assert len({slot_map.keyslot(rl.keys(k).limit) for k in keys}) > 1
        roomy, tight = Limit.of(GCRA, 100, 60_000, 0, False), Limit.of(GCRA, 1, 60_000, 0, False)

        await rl.check(keys[-1], tight, 1)  # the last key has no room left
        checks = [Check(k, roomy, 5) for k in keys[:-1]] + [Check(keys[-1], tight, 1)]
        allowed, decisions = await rl.check_many(checks, all_or_none=True)
        assert not allowed and not decisions[-1].allowed
        for k in keys[:-1]:
            assert (await rl.check(k, roomy, 0)).remaining == 100, k  # every slot's hits given back
        allowed, _ = await rl.check_many(checks[:-1], all_or_none=True)
        assert allowed and (await rl.check(keys[0], roomy, 0)).remaining == 95
    finally:
        await commands.aclose()
        await slot_map.aclose()


# ------------------------------------------------------------------ the Python client


def test_a_concurrency_limit_holds_permits_and_a_release_wakes_a_waiter_at_once(client, name):
    api = client.rate_limit(name, rate=2, per=60, algorithm="concurrency")
    first, second = api.check(), api.check()
    assert first.allowed and second.allowed and first.permit != second.permit and second.remaining == 0
    refused = api.check()
    assert not refused.allowed and 59 < refused.retry_after <= 60  # the earliest permit's end
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(api.wait(1, timeout=20)))
    waiter.start()
    wait_until(lambda: client.rate_limit(name, rate=2, per=60, algorithm="concurrency").check(0).remaining == 0
               and waiter.is_alive(), message="the waiter to be waiting")
    started = time.monotonic()
    assert api.release(first.permit) and not api.release(first.permit)
    waiter.join(20)
    assert got and got[0].allowed and got[0].permit and time.monotonic() - started < 10  # not the 60 s period
    api.release(got[0].permit)
    api.release(second.permit)
    with api as d:  # holds one permit for the block, gives it back after
        assert d.permit and api.check(0).remaining == 1
    assert api.check(0).remaining == 2

    @api
    def work():
        return api.check(0).remaining

    assert work() == 1 and api.check(0).remaining == 2


def test_the_client_checks_waits_and_decorates(client, name):
    import concord

    api = client.rate_limit(name, rate=4, per=0.4, burst=2)
    assert [api.check().allowed for _ in range(3)] == [True, True, False]
    refused = api.check()
    assert not refused.allowed and 0 < refused.retry_after <= 0.1
    started = time.monotonic()
    with api as d:  # waits exactly retry_after, not a polling interval
        assert d.allowed
    assert time.monotonic() - started < 1.0
    calls = []

    @api
    def work(i):
        calls.append(i)
        return i

    assert [work(i) for i in range(4)] == [0, 1, 2, 3] and calls == [0, 1, 2, 3]
    with pytest.raises(concord.RateLimitTimeout):
        client.rate_limit(name, rate=4, per=0.4, burst=2).wait(2, timeout=0.01)
    with pytest.raises(ValueError):
        api.wait(3)  # more than the burst never passes at once
    stored = client.rate_limit(f"{name}-stored")
    with pytest.raises(concord.RateLimitNotFound):
        stored.check()
    assert stored.set_limit(concord.Limit(rate=1, per=60, algorithm="fixed_window")) is None
    assert stored.get_limit() == concord.Limit(1, 60.0, 0, "fixed_window", False)
    assert stored.check().allowed and not stored.check().allowed
    with pytest.raises(concord.RateLimitMismatch):
        client.rate_limit(f"{name}-stored", rate=2, per=60, algorithm="fixed_window").check()
    stored.reset()
    assert stored.check(0).remaining == 1


async def test_the_async_client_checks_waits_and_decorates(aclient, name):
    api = aclient.rate_limit(name, rate=10, per=1.0, burst=1)
    assert (await api.check()).allowed
    async with api as d:
        assert d.allowed

    @api
    async def work():
        return "done"

    assert await work() == "done"
    assert (await api.check(0)).remaining == 0


# ------------------------------------------------------------------ Wait


async def _queue_waiters(target: str, redis, name: str, limit: pb.Limit, n: int, wait_ms: int):
    """Takes the key's one unit, then queues n Waits one after another (each in the
    key's queue before the next is sent). Returns (the calls, the order they ended in)."""
    queue = KeySpace("concord").ratelimit(name).queue
    channel = grpc.aio.insecure_channel(target)
    stub = ratelimit_pb2_grpc.RateLimitServiceStub(channel)
    assert (await stub.Check(pb.CheckRequest(key=name, limit=limit, hits=1), timeout=10)).allowed
    done: list[int] = []

    async def wait(i: int) -> pb.CheckResponse:
        r = await stub.Wait(pb.WaitRequest(key=name, limit=limit, wait_timeout=_d(wait_ms)), timeout=20)
        done.append(i)
        return r

    calls = []
    for i in range(n):
        calls.append(asyncio.ensure_future(wait(i)))
        await async_wait_until(lambda k=i + 1: _async(redis.zcard(queue) >= k or len(done) > 0),
                               message=f"waiter {i} to queue")

    async def replies() -> list[pb.CheckResponse]:
        try:
            return await asyncio.gather(*calls)
        finally:
            await channel.close()

    return replies(), done


async def test_waiters_are_served_in_the_order_they_came(concord_server, redis_sync, name):
    """Five waiters behind an empty key (2 a second, one at a time): each is woken when
    the limit allows, in arrival order, the head at its exact time and the next when
    the head tells it, not by polling."""
    replies, done = await _queue_waiters(concord_server.target, redis_sync, name,
                                         _limit(rate=2, period_ms=1000, burst=1), 5, 10_000)
    assert all(r.allowed for r in await replies) and done == sorted(done), done
    assert redis_sync.zcard(KeySpace("concord").ratelimit(name).queue) == 0


async def test_waiters_keep_their_order_across_a_redis_pause(fresh_redis, tmp_path, name):
    """Redis stops answering (SIGSTOP, under the server's 5 s reply timeout) while five
    waiters are queued and grants fall due: once it answers again every waiter is
    served, still in the order it came."""
    import os
    import signal

    from support import ServerProcess

    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    try:
        with fresh_redis.client() as r:
            replies, done = await _queue_waiters(server.target, r, name, _limit(rate=4, period_ms=1000, burst=1),
                                                 5, 15_000)
            os.kill(fresh_redis.proc.pid, signal.SIGSTOP)
            resume = threading.Timer(1.0, os.kill, (fresh_redis.proc.pid, signal.SIGCONT))  # 4 grants fall due
            resume.start()
            try:
                got = await replies
            finally:
                resume.join()
            assert all(g.allowed for g in got) and done == sorted(done), done
            assert r.zcard(KeySpace("concord").ratelimit(name).queue) == 0
    finally:
        server.stop()
    assert "Traceback" not in server.log_text()


async def test_a_wait_not_allowed_in_time_takes_nothing_and_a_vanished_waiter_holds_nobody_up(
        concord_server, redis_sync, name):
    slow = _limit(rate=1, period_ms=60_000)
    queue = KeySpace("concord").ratelimit(name).queue
    async with grpc.aio.insecure_channel(concord_server.target) as channel:
        stub = ratelimit_pb2_grpc.RateLimitServiceStub(channel)
        assert (await stub.Check(pb.CheckRequest(key=name, limit=slow, hits=1), timeout=10)).allowed
        r = await stub.Wait(pb.WaitRequest(key=name, limit=slow, wait_timeout=_d(300)), timeout=10)
        assert not r.allowed and r.retry_after.seconds >= 58
        assert redis_sync.zcard(queue) == 0  # it left the queue
        # A waiter whose client goes away leaves the queue: the next one is not held up.
        gone = asyncio.ensure_future(stub.Wait(pb.WaitRequest(key=name, limit=slow, wait_timeout=_d(30_000)),
                                               timeout=40))
        await async_wait_until(lambda: _async(redis_sync.zcard(queue) == 1), message="the first waiter to queue")
        gone.cancel()
        await async_wait_until(lambda: _async(redis_sync.zcard(queue) == 0), message="the cancelled waiter to leave")
    _fails(lambda: _sync_wait(concord_server, pb.WaitRequest(key=name, hits=1, wait_timeout=_d(100))),
           grpc.StatusCode.NOT_FOUND, "RATE_LIMIT_NOT_FOUND")


def _sync_wait(server, request):
    with grpc.insecure_channel(server.target) as channel:
        return ratelimit_pb2_grpc.RateLimitServiceStub(channel).Wait(request, timeout=10)


async def _async(value):
    return value


async def test_only_the_head_of_the_queue_takes_when_the_limit_allows(limits, name):
    """On a controlled clock: a later waiter that asks first when room comes back is
    still refused (queued behind the head), the head then takes it, and the next in
    line is told its retry time once it is the head."""
    from concord_server.primitives.ratelimit import QUEUED

    rl, clock = limits
    limit = Limit.of(GCRA, 1, 1000, 1, False)
    k = rl.keys(name)
    assert (await rl.check(name, limit, 1)).allowed
    first = await rl._wait_step(name, k, "first", limit, 1, 5000)
    second = await rl._wait_step(name, k, "second", limit, 1, 5000)
    assert (first.allowed, first.retry_ms) == (False, 1000) and (second.allowed, second.retry_ms) == (False, QUEUED)
    clock.at(1000)
    assert (await rl._wait_step(name, k, "second", limit, 1, 4000)).retry_ms == QUEUED  # room, but not its turn
    assert (await rl._wait_step(name, k, "first", limit, 1, 4000)).allowed
    assert (await rl._wait_step(name, k, "second", limit, 1, 4000)).retry_ms == 1000  # the head now
    clock.at(7000)  # the second waiter's wait is over: whoever runs next drops it
    third = await rl._wait_step(name, k, "third", limit, 1, 5000)
    assert third.allowed


@pytest.mark.parametrize("algorithm", list(CASES), ids=[a.name for a in CASES])
@pytest.mark.parametrize("all_or_none", [False, True], ids=["each", "all-or-none"])
async def test_checks_of_one_key_in_one_call_never_pass_more_than_the_limit(limits, name, algorithm, all_or_none):
    """The bench found it: a CheckMany naming a key several times decided each against
    the state before the call, so all of them passed. Now each sees the ones before
    it (or, all or none, they are decided as one check of their summed hits)."""
    rl, _ = limits
    limit = Limit.of(algorithm, 3, 1000, 0, False)
    allowed, decisions = await rl.check_many([Check(name, limit, 1)] * 5 + [Check(f"{name}:other", limit, 1)],
                                             all_or_none)
    passed = sum(d.allowed for d in decisions[:5])
    if all_or_none:
        assert not allowed and passed == 0 and (await rl.check(name, limit, 0)).remaining == 3
        allowed, decisions = await rl.check_many([Check(name, limit, 1)] * 3, all_or_none)
        assert allowed and (await rl.check(name, limit, 0)).remaining == 0
    else:
        assert passed == 3 and [d.allowed for d in decisions[:5]] == [True] * 3 + [False] * 2
        assert (await rl.check(name, limit, 0)).remaining == 0
    other = Limit.of(algorithm, 4, 1000, 0, False)
    with pytest.raises(RateLimitMismatch):
        await rl.check_many([Check(f"{name}:two", limit, 1), Check(f"{name}:two", other, 1)], all_or_none)


async def test_waiters_are_woken_by_the_key_s_doorbell_not_its_safety_beat(redis_server, name):
    """The doorbell here beats only once a minute, so only a ring can wake the waiters in
    time: a Release wakes the head, and the head, done, rings the one behind it."""
    from support import _doorbell_wiring

    async with _doorbell_wiring(redis_server.url, broadcast=False, interval=60.0, prefix=None) as (
            commands, keys, bells):
        rl = RateLimits(commands, keys, bells)
        limit = Limit.of(CONC, 1, 60_000, 0, False)
        held = await rl.check(name, limit, 1)
        first = asyncio.ensure_future(rl.wait(name, limit, 1, 20_000))
        await async_wait_until(lambda: _waiting(commands, rl, name, 1), message="the first waiter in the queue")
        second = asyncio.ensure_future(rl.wait(name, limit, 1, 20_000))
        await async_wait_until(lambda: _waiting(commands, rl, name, 2), message="the second waiter in the queue")
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await rl.release(name, held.permit)
        got = await asyncio.wait_for(first, 10)
        assert got.allowed and await rl.release(name, got.permit)
        assert (await asyncio.wait_for(second, 10)).allowed
        assert loop.time() - started < 10  # far below the 60 s beat
        await rl.drain(1.0)


async def _waiting(commands, rl: RateLimits, name: str, n: int) -> bool:
    return await commands.execute_command("ZCARD", rl.keys(name).queue) == n
