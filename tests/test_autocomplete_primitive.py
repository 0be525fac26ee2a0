"""The autocomplete primitive against real Redis: property tests against brute force.

Names are drawn from accents (precomposed and combining), CJK, emoji, fullwidth and
mixed case letters, characters whose case folding grows or changes (ß, İ, ı, ǅ),
the book's sentinel characters ({ and `), and the characters this encoding uses
as its separator (\\0, \\1) and range cap (ÿ is U+00FF; the cap byte 0xFF is no
character), so a name containing any of them must still be found.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from concord_server.autopipeline import AutoPipeline
from concord_server.errors import NameNotFound
from concord_server.keys import KeySpace
from concord_server.primitives.autocomplete import Autocomplete, normalize
from concord_server.redis_client import connect

ALPHABET = list("aAbBzZéÉeEe\u0301ßSsİıIiǅǆ漢字かな😀🙂ｅＥ{`\x00\x01ÿ -'.")
NAMES = st.text(st.sampled_from(ALPHABET), min_size=1, max_size=8)
PREFIXES = st.text(st.sampled_from(ALPHABET), max_size=3)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(url: str, check, **kw):
    """Runs check(autocomplete) on a fresh key prefix, in an event loop of its own."""

    async def main():
        r = connect(url, 4)
        commands = AutoPipeline(r.connection_pool)
        try:
            return await check(Autocomplete(commands, KeySpace(f"ac{uuid.uuid4().hex[:8]}"), **kw))
        finally:
            await commands.aclose()
            await r.aclose()

    return asyncio.run(main())


def by_name(names):
    return sorted(set(names), key=lambda n: (normalize(n), n))


def matches(names, prefix):
    p = normalize(prefix)
    return [n for n in names if normalize(n).startswith(p)]


@PROPERTY
@given(names=st.lists(NAMES, min_size=1, max_size=30), prefix=PREFIXES, limit=st.integers(1, 12))
def test_suggest_matches_brute_force_in_name_order(redis_server, names, prefix, limit):
    async def check(ac):
        await ac.add_names("i", [(n, None) for n in names])
        got = [s.name for s in await ac.suggest("i", prefix, limit)]
        assert await ac.count("i", prefix) == len(matches(set(names), prefix))
        return got

    assert run(redis_server.url, check) == matches(by_name(names), prefix)[:limit]


@PROPERTY
@given(scored=st.dictionaries(NAMES, st.integers(-5, 5), min_size=1, max_size=30), prefix=PREFIXES,
       limit=st.integers(1, 12), range_scan=st.sampled_from([1, 5, 1000]))
def test_best_scored_suggestions_match_brute_force(redis_server, scored, prefix, limit, range_scan):
    async def check(ac):
        await ac.add_names("i", [(n, float(s)) for n, s in scored.items()])
        found, truncated = await ac.suggest_best("i", prefix, limit)
        assert not truncated  # the score scan (20,000) covers these small indexes
        return [(s.name, s.score) for s in found]

    want = sorted(matches(scored, prefix), key=lambda n: (-scored[n], normalize(n), n))[:limit]
    assert run(redis_server.url, check, range_scan=range_scan) == [(n, float(scored[n])) for n in want]


@PROPERTY
@given(adds=st.lists(NAMES, min_size=1, max_size=40), prefix=PREFIXES, infix=st.booleans())
def test_suggest_recent_matches_brute_force(redis_server, adds, prefix, infix):
    async def check(ac):
        for contact in adds:
            await ac.add_recent("u", contact)
        return await ac.recent("u"), await ac.suggest_recent("u", prefix, 1000, infix)

    recent_first = list(dict.fromkeys(reversed(adds)))[:10]
    p = normalize(prefix)
    want = [c for c in recent_first if normalize(c).startswith(p)]
    if infix:
        want += [c for c in recent_first if not normalize(c).startswith(p) and p in normalize(c)]
    assert run(redis_server.url, check, recent_max=10) == (recent_first, want)


def test_names_that_normalize_alike_are_both_kept_and_scores_rank(redis_server):
    async def check(ac):
        assert await ac.add_names("g", [("Åsa", None), ("åsa", 2.0), ("ÅSA", None), ("Astrid", 12.0)]) == 4
        assert await ac.add_names("g", [("Åsa", 1.0)]) == 0  # exists: score only
        assert [s.name for s in await ac.suggest("g", "ÅS", 10)] == ["ÅSA", "Åsa", "åsa"]
        assert await ac.increment("g", "ÅSA", 5) == 5.0
        best, _ = await ac.suggest_best("g", "", 3)
        assert [(s.name, s.score) for s in best] == [("Astrid", 12.0), ("ÅSA", 5.0), ("åsa", 2.0)]
        with pytest.raises(NameNotFound):
            await ac.increment("g", "nobody", 1)
        assert await ac.remove_names("g", ["ÅSA", "nobody"]) == 1
        assert await ac.count("g") == 3

    run(redis_server.url, check)


def test_a_very_common_prefix_is_searched_best_first_at_bounded_cost(redis_server):
    async def check(ac):
        await ac.add_names("big", [(f"a{i:04d}", float(i % 97)) for i in range(3000)] +
                                  [(f"z{i:04d}", 500.0) for i in range(1000)])
        # 3000 matches (> range_scan): best-first through the index; the z's come first.
        best, truncated = await ac.suggest_best("big", "a", 3)
        assert not truncated and [s.score for s in best] == [96.0, 96.0, 96.0]

    async def cut_short(ac):
        await ac.add_names("big", [(f"a{i:04d}", float(i % 97)) for i in range(3000)] +
                                  [(f"z{i:04d}", 500.0) for i in range(1000)])
        # The 500 best are all z's: the rest comes from the best of the range's first 100.
        best, truncated = await ac.suggest_best("big", "a", 3)
        assert truncated and [(s.name, s.score) for s in best] == [("a0096", 96.0), ("a0095", 95.0), ("a0094", 94.0)]

    run(redis_server.url, check, range_scan=100, score_scan=2000)
    run(redis_server.url, cut_short, range_scan=100, score_scan=500)


def test_concurrent_adds_and_removes_leave_exactly_the_survivors(redis_server):
    async def check(ac):
        names = [f"user-{i}" for i in range(400)]

        async def add(chunk):
            await ac.add_names("c", [(n, None) for n in chunk])

        async def remove(chunk):
            await ac.remove_names("c", chunk)

        await asyncio.gather(*(add(names[i:i + 20]) for i in range(0, 400, 20)))
        doomed = names[::3]
        await asyncio.gather(*(remove(doomed[i:i + 7]) for i in range(0, len(doomed), 7)),
                             *(add([f"late-{i}"]) for i in range(50)))
        assert await ac.count("c") == 400 - len(doomed) + 50
        survivors = [s.name for s in await ac.suggest("c", "user-", 1000)]
        assert survivors == sorted(set(names) - set(doomed))

    run(redis_server.url, check)
