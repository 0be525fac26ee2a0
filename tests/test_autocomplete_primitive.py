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
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from concord_server.autopipeline import AutoPipeline
from concord_server.errors import NameNotFound
from concord_server.keys import KeySpace
from concord_server.primitives.autocomplete import Autocomplete, member, normalize
from concord_server.redis_link import Endpoint

ALPHABET = list("aAbBzZéÉeEe\u0301ßSsİıIiǅǆ漢字かな😀🙂ｅＥ{`\x00\x01ÿ -'.")
NAMES = st.text(st.sampled_from(ALPHABET), min_size=1, max_size=8)
PREFIXES = st.text(st.sampled_from(ALPHABET), max_size=3)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(url: str, check, **kw):
    """Runs check(autocomplete) on a fresh key prefix, in an event loop of its own."""

    async def main():
        commands = AutoPipeline(Endpoint.from_url(url))
        try:
            return await check(Autocomplete(commands, KeySpace(f"ac{uuid.uuid4().hex[:8]}"), **kw))
        finally:
            await commands.aclose()

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
       limit=st.integers(1, 12), bounds=st.sampled_from([(1, 1), (5, 3), (1000, 100)]))
def test_best_scored_suggestions_match_brute_force(redis_server, scored, prefix, limit, bounds):
    async def check(ac):
        await ac.add_names("i", [(n, float(s)) for n, s in scored.items()])
        found, truncated = await ac.suggest_best("i", prefix, limit)
        assert not truncated  # the score scan (20,000) covers these small indexes
        return [(s.name, s.score) for s in found]

    want = sorted(matches(scored, prefix), key=lambda n: (-scored[n], normalize(n), n))[:limit]
    assert run(redis_server.url, check, rank_whole=bounds[0], top_kept=bounds[1]) == [
        (n, float(scored[n])) for n in want]


async def best_answers(ac, prefixes, top_kept: int) -> dict:
    """suggest_best for every prefix at limits around top_kept (none truncated)."""
    got = {}
    for p in sorted(prefixes):
        for limit in sorted({1, top_kept, top_kept + 1}):
            found, truncated = await ac.suggest_best("i", p, limit)
            assert not truncated
            got[p, limit] = [(s.name, s.score) for s in found]
    return got


def assert_best(got: dict, index: dict[str, float]) -> None:
    for (p, limit), found in got.items():
        want = sorted(matches(index, p), key=lambda n: (-index[n], normalize(n), n))[:limit]
        assert found == [(n, index[n]) for n in want], (p, limit)


# Writes that move names in and out of the best-score lists: adds with and without
# scores, score changes both ways, removals. Few letters, so prefixes are shared.
# A few names with shared prefixes, so writes keep hitting the same lists.
OPS = st.lists(st.tuples(st.sampled_from(["add", "add_unscored", "increment", "remove"]),
                         st.sampled_from(["a", "A", "ab", "abé", "aÉ", "aé", "a\x00", "b", "ba"]),
                         st.integers(-6, 6)), min_size=1, max_size=60)


@settings(PROPERTY, max_examples=200)
@given(ops=OPS, bounds=st.sampled_from([(1, 1), (2, 1), (3, 2), (6, 4)]))
# A list shrunk by a removal (to [ab] when "a" goes) must not take a name ranking
# below names left outside it: "abé" (0) ranks below "A" and "aé", which are not listed.
@example(ops=[("add", "a", 5), ("add", "ab", 4), ("add", "A", 3), ("add", "aé", 1), ("remove", "a", 0),
              ("add", "abé", 0)], bounds=(2, 2))
def test_best_score_lists_stay_exact_through_any_writes(redis_server, ops, bounds):
    """Every prefix's best-score answer matches brute force after any mix of writes,
    and the lists stay within their bounds (at most top_kept names, and only for
    prefixes more than rank_whole names start with)."""
    rank_whole, top_kept = bounds
    index: dict[str, float] = {}
    for kind, n, v in ops:
        if kind == "add":
            index[n] = float(v)
        elif kind == "add_unscored":
            index.setdefault(n, 0.0)
        elif kind == "increment" and n in index:
            index[n] += v
        elif kind == "remove":
            index.pop(n, None)
    prefixes = {""} | {n[:i] for n in index for i in range(1, len(n) + 1)} | {n[:1] for _, n, _ in ops}

    async def check(ac):
        for kind, n, v in ops:
            if kind == "add":
                await ac.add_names("i", [(n, float(v))])
            elif kind == "add_unscored":
                await ac.add_names("i", [(n, None)])
            elif kind == "increment":
                try:
                    await ac.increment("i", n, v)
                except NameNotFound:
                    pass
            else:
                await ac.remove_names("i", [n])
        got = await best_answers(ac, prefixes, top_kept)
        tops = ac._index("i").tops
        lists = await ac._command("ZRANGEBYLEX", tops, "-", "+", raw=True)
        return got, lists

    got, lists = run(redis_server.url, check, rank_whole=rank_whole, top_kept=top_kept)
    assert_best(got, index)
    per_prefix: dict[bytes, int] = {}
    for entry in lists:
        prefix = entry[:entry.index(b"\x00\x00")]
        per_prefix[prefix] = per_prefix.get(prefix, 0) + 1
    for prefix, n in per_prefix.items():
        assert n <= top_kept
        assert len([m for m in index if member(m).startswith(prefix)]) > rank_whole, prefix


BATCHES = st.lists(st.lists(st.tuples(st.sampled_from(["a", "A", "ab", "abé", "aÉ", "aé", "a\x00", "b", "ba"]),
                                     st.one_of(st.none(), st.integers(-6, 6))), min_size=1, max_size=12),
                   min_size=1, max_size=6)


@settings(PROPERTY, max_examples=150)
@given(batches=BATCHES, removed=st.sets(st.sampled_from(["a", "ab", "aé", "b"])),
       bounds=st.sampled_from([(1, 1), (2, 1), (3, 2), (6, 4)]))
def test_best_score_lists_stay_exact_through_batched_writes(redis_server, batches, removed, bounds):
    """The same through multi-name AddNames calls, where one script call learns counts
    and list tails once for the whole batch (names_common.lua)."""
    rank_whole, top_kept = bounds
    index: dict[str, float] = {}
    for batch in batches:
        for n, v in batch:
            if v is not None:
                index[n] = float(v)
            else:
                index.setdefault(n, 0.0)
    for n in removed:
        index.pop(n, None)
    prefixes = {""} | {n[:i] for _, b in enumerate(batches) for n, _ in b for i in range(1, len(n) + 1)}

    async def check(ac):
        for batch in batches:
            await ac.add_names("i", [(n, None if v is None else float(v)) for n, v in batch])
        await ac.remove_names("i", sorted(removed))
        return await best_answers(ac, prefixes, top_kept)

    assert_best(run(redis_server.url, check, rank_whole=rank_whole, top_kept=top_kept), index)


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


def test_a_batch_that_takes_a_prefix_past_rank_whole_builds_its_list(redis_server):
    """Within one AddNames call the script counts the names it adds, so the crossing
    of rank_whole is seen and the list built at once (not left to the first read)."""

    async def check(ac):
        await ac.add_names("i", [(f"a{i}", float(i)) for i in range(10)])
        tops = ac._index("i").tops
        return await ac._command("ZRANGEBYLEX", tops, b"[a\x00\x00", b"[a\x00\x00\xff", raw=True)

    entries = run(redis_server.url, check, rank_whole=3, top_kept=2)
    assert [e.split(b"\x00\x00")[-1] for e in entries] == [b"a9", b"a8"]


def test_a_common_prefix_is_answered_from_its_list_and_refilled_after_removals(redis_server):
    async def check(ac):
        await ac.add_names("big", [(f"a{i:04d}", float(i % 97)) for i in range(3000)] +
                                  [(f"z{i:04d}", 500.0) for i in range(1000)])
        tops = ac._index("big").tops
        # 3000 names start with "a" (> rank_whole): its list holds the best 10.
        best, truncated = await ac.suggest_best("big", "a", 3)
        assert not truncated and [s.score for s in best] == [96.0, 96.0, 96.0]
        assert await ac._command("ZLEXCOUNT", tops, b"[a\x00\x00", b"[a\x00\x00\xff") == 10
        # Removing the 31 names scoring 96 (and 95) empties the list: the next read
        # refills it from a best-first search of the index.
        await ac.remove_names("big", [f"a{i:04d}" for i in range(3000) if i % 97 >= 95])
        best, truncated = await ac.suggest_best("big", "a", 3)
        assert not truncated and [s.score for s in best] == [94.0, 94.0, 94.0]
        assert await ac._command("ZLEXCOUNT", tops, b"[a\x00\x00", b"[a\x00\x00\xff") == 10

    async def cut_short(ac):
        await ac.add_names("big", [(f"a{i:04d}", float(i % 97)) for i in range(3000)] +
                                  [(f"z{i:04d}", 500.0) for i in range(1000)])
        # More than top_kept asked: the 500 best read are all z's, so the rest comes
        # from the best of the range's first rank_whole (100) names.
        best, truncated = await ac.suggest_best("big", "a", 12)
        assert truncated and [(s.name, s.score) for s in best][:3] == [("a0096", 96.0), ("a0095", 95.0),
                                                                        ("a0094", 94.0)]

    run(redis_server.url, check, rank_whole=100, top_kept=10, score_scan=2000)
    run(redis_server.url, cut_short, rank_whole=100, top_kept=10, score_scan=500)


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
