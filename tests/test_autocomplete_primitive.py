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

from concord_server.store.autopipeline import AutoPipeline
from concord_server.errors import NameNotFound
from concord_server.keys import KeySpace
from concord_server.primitives.autocomplete import Autocomplete, member, normalize
from concord_server.store.link import Endpoint

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
WRITES = ("add", "add_unscored", "increment", "remove")
OPS = st.lists(st.tuples(st.sampled_from(WRITES),
                         st.sampled_from(["a", "A", "ab", "abé", "aÉ", "aé", "a\x00", "b", "ba"]),
                         st.integers(-6, 6)), min_size=1, max_size=60)


def model_write(index: dict[str, float], kind: str, n: str, v) -> None:
    """The same write on the Python model: name -> score."""
    if kind == "add":
        index[n] = float(v)
    elif kind == "add_unscored":
        index.setdefault(n, 0.0)
    elif kind == "increment" and n in index:
        index[n] += v
    elif kind == "remove":
        index.pop(n, None)


async def apply_write(ac, kind: str, n: str, v) -> None:
    """One write of the model-checked traffic on index "i"."""
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
        model_write(index, kind, n, v)
    prefixes = {""} | {n[:i] for n in index for i in range(1, len(n) + 1)} | {n[:1] for _, n, _ in ops}

    async def check(ac):
        for kind, n, v in ops:
            await apply_write(ac, kind, n, v)
        got = await best_answers(ac, prefixes, top_kept)
        tops = ac._index("i").tops
        lists = await ac._command("ZRANGEBYLEX", tops, "-", "+", raw=True)
        return got, lists

    got, lists = run(redis_server.url, check, rank_whole=rank_whole, top_kept=top_kept)
    assert_best(got, index)
    assert_lists(lists, index, rank_whole, top_kept)


def assert_lists(lists: list[bytes], index: dict[str, float], rank_whole: int, top_kept: int) -> None:
    """The tops zset holds exactly the positive names (under b"\\xff"), and its
    cached lists (built by reads after the writes) are well formed: each has its
    marker, at most top_kept names, all of them with a positive score, and only
    prefixes more than rank_whole names start with have one."""
    per_prefix: dict[bytes, list[bytes]] = {}
    for entry in lists:
        if entry.startswith(b"\xff"):  # a positive name, or the format mark
            continue
        prefix, rest = entry.split(b"\x00\x00", 1)
        per_prefix.setdefault(prefix, []).append(rest)
    positive = {member(n) for n, v in index.items() if v > 0}
    assert {e[1:-8] for e in lists if e.startswith(b"\xff") and e != b"\xff"} == positive
    for prefix, rests in per_prefix.items():
        assert rests[-1] == b"\xff", prefix  # the marker, last
        assert len(rests) - 1 <= top_kept
        assert all(r[8:] in positive for r in rests[:-1]), prefix
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


async def list_of(ac, index: str, prefix: bytes) -> list[bytes] | None:
    """The names in prefix's cached best-score list, best first; None: no list."""
    entries = await ac._command("ZRANGEBYLEX", ac._index(index).tops, b"[" + prefix + b"\x00\x00",
                                b"[" + prefix + b"\x00\x00\xff", raw=True)
    if not entries:
        return None
    assert entries[-1] == prefix + b"\x00\x00\xff"  # the marker
    return [e[len(prefix) + 10:].split(b"\x00\x00")[-1] for e in entries[:-1]]


def test_lists_are_built_by_the_first_best_suggest_and_kept_by_scored_writes(redis_server):
    """Loading builds no list; the first best-score Suggest of a common prefix builds
    it; unscored names never touch it; scored writes keep it exact or drop it."""

    async def check(ac):
        await ac.add_names("i", [(f"a{i}", float(i)) for i in range(10)])
        assert await ac._command("ZLEXCOUNT", ac._index("i").tops, b"[a", b"[a\xff") == 0
        best, _ = await ac.suggest_best("i", "a", 1)
        assert [s.name for s in best] == ["a9"]
        assert await list_of(ac, "i", b"a") == [b"a9", b"a8"]
        await ac.add_names("i", [(f"a{i}", None) for i in range(10, 20)])  # score 0: not listed
        assert await list_of(ac, "i", b"a") == [b"a9", b"a8"]
        await ac.add_names("i", [("a20", 100.0), ("a3", 3.5)])  # a20 goes in, a8 out; a3 stays out
        assert await list_of(ac, "i", b"a") == [b"a20", b"a9"]
        assert await ac.increment("i", "a9", 50) == 59.0  # moves within the list
        assert await list_of(ac, "i", b"a") == [b"a20", b"a9"]
        assert await ac.increment("i", "a9", -60) == -1.0  # leaves it: the next best is unknown
        assert await list_of(ac, "i", b"a") is None
        best, _ = await ac.suggest_best("i", "a", 3)  # rebuilt on read
        assert [(s.name, s.score) for s in best] == [("a20", 100.0), ("a8", 8.0), ("a7", 7.0)]
        assert await list_of(ac, "i", b"a") == [b"a20", b"a8"]
        # limit beyond the list: read from the index, then 0s in name order, then the negative
        best, _ = await ac.suggest_best("i", "a", 20)
        assert [s.name for s in best] == ["a20", "a8", "a7", "a6", "a5", "a4", "a3", "a2", "a1",
                                          "a0", "a10", "a11", "a12", "a13", "a14", "a15", "a16", "a17",
                                          "a18", "a19"]
        assert await ac.remove_names("i", [f"a{i}" for i in range(21)]) == 21
        assert await ac._command("EXISTS", ac._index("i").scores, ac._index("i").tops) == 0

    run(redis_server.url, check, rank_whole=3, top_kept=2)


def test_an_unscored_index_stores_no_scores_and_ranks_by_name(redis_server):
    async def check(ac):
        await ac.add_names("u", [(f"n{i:03d}", None) for i in range(300)] + [("n999", 0.0)])
        assert await ac._command("EXISTS", ac._index("u").scores) == 0
        best, truncated = await ac.suggest_best("u", "n", 5)
        assert not truncated and [(s.name, s.score) for s in best] == [(f"n{i:03d}", 0.0) for i in range(5)]
        assert await ac.increment("u", "n001", 0) == 0.0
        assert await ac._command("EXISTS", ac._index("u").scores) == 0

    run(redis_server.url, check, rank_whole=10, top_kept=4)


# Reads between the writes, so the writes meet the lists the reads built.
LIVE_OPS = st.lists(st.tuples(st.sampled_from(["add", "add_unscored", "increment", "remove", "read", "read"]),
                              st.sampled_from(["a", "A", "ab", "abé", "aÉ", "aé", "a\x00", "b", "ba", "abc", "abd"]),
                              st.integers(-6, 6)), min_size=1, max_size=80)


@settings(PROPERTY, max_examples=250)
@given(ops=LIVE_OPS, bounds=st.sampled_from([(1, 1), (2, 1), (1, 2), (3, 2), (2, 3)]))
@example(ops=[("add", "a", 5), ("add", "ab", 4), ("add", "A", 3), ("read", "a", 1), ("remove", "a", 0),
              ("add", "abé", 0), ("read", "a", 2), ("increment", "ab", -9), ("read", "ab", 1)], bounds=(1, 2))
def test_best_answers_stay_exact_when_reads_and_writes_interleave(redis_server, ops, bounds):
    """Every best-score Suggest, wherever it falls among adds, removals and
    increments, matches a Python model, and the lists stay well formed."""
    rank_whole, top_kept = bounds
    index: dict[str, float] = {}
    expected = []
    for kind, n, v in ops:
        if kind in WRITES:
            model_write(index, kind, n, v)
        else:
            p, limit = n[:1 + abs(v) % 2], 1 + abs(v) % (top_kept + 2)
            want = sorted(matches(index, p), key=lambda x: (-index[x], normalize(x), x))[:limit]
            expected.append([(x, index[x]) for x in want])

    async def check(ac):
        got = []
        for kind, n, v in ops:
            if kind in WRITES:
                await apply_write(ac, kind, n, v)
            else:
                found, truncated = await ac.suggest_best("i", n[:1 + abs(v) % 2], 1 + abs(v) % (top_kept + 2))
                assert not truncated
                got.append([(s.name, s.score) for s in found])
        return got, await ac._command("ZRANGEBYLEX", ac._index("i").tops, "-", "+", raw=True)

    got, lists = run(redis_server.url, check, rank_whole=rank_whole, top_kept=top_kept)
    assert got == expected
    assert_lists(lists, index, 0, top_kept)  # a list may outlive its prefix's count


@pytest.mark.parametrize("seed", range(4))
def test_best_answers_match_a_model_through_random_batched_traffic(redis_server, seed):
    """A larger randomized run: 400 names over a few shared prefixes, batches of adds
    (some scored), removals and increments, with best-score Suggests of every prefix
    (limits below and above top_kept) between them, compared with a Python model."""
    import random

    rng = random.Random(seed)
    pool = [rng.choice(["Ab", "ab", "Ac", "b", "Bé", "c"]) + rng.choice("abcdé") + str(i) for i in range(400)]
    prefixes = sorted({n[:k] for n in pool for k in (1, 2, 3)} | {""})

    async def check(ac):
        index: dict[str, float] = {}
        for _ in range(30):
            what = rng.random()
            if what < 0.4:
                batch = [(n, rng.choice([None, None, float(rng.randint(-3, 20))])) for n in rng.sample(pool, 40)]
                await ac.add_names("r", batch)
                for n, s in batch:
                    if s is None:
                        index.setdefault(n, 0.0)
                    else:
                        index[n] = s
            elif what < 0.6:
                gone = rng.sample(pool, 25)
                assert await ac.remove_names("r", gone) == len(set(gone) & set(index))
                for n in gone:
                    index.pop(n, None)
            else:
                for n in rng.sample(sorted(index), min(15, len(index))):
                    delta = float(rng.randint(-8, 8))
                    index[n] += delta
                    assert await ac.increment("r", n, delta) == index[n]
            for p in rng.sample(prefixes, 8):
                limit = rng.choice([1, 3, 8, 12])
                found, truncated = await ac.suggest_best("r", p, limit)
                assert not truncated
                want = sorted(matches(index, p), key=lambda x: (-index[x], normalize(x), x))[:limit]
                assert [(s.name, s.score) for s in found] == [(x, index[x]) for x in want], (p, limit)
        lists = await ac._command("ZRANGEBYLEX", ac._index("r").tops, "-", "+", raw=True)
        return index, lists

    index, lists = run(redis_server.url, check, rank_whole=20, top_kept=8)
    assert lists  # the common prefixes were listed
    # a list may outlive its prefix falling to rank_whole names: only its form is checked
    assert_lists(lists, index, 0, 8)


def test_a_common_prefix_is_answered_from_its_list_and_refilled_after_removals(redis_server):
    async def check(ac):
        await ac.add_names("big", [(f"a{i:04d}", float(i % 97)) for i in range(3000)] +
                                  [(f"z{i:04d}", 500.0) for i in range(1000)])
        tops = ac._index("big").tops
        # 3000 names start with "a" (> rank_whole): the first read builds its list
        # of the best 10 (and its marker).
        best, truncated = await ac.suggest_best("big", "a", 3)
        assert not truncated and [s.score for s in best] == [96.0, 96.0, 96.0]
        assert await ac._command("ZLEXCOUNT", tops, b"[a\x00\x00", b"[a\x00\x00\xff") == 11
        # Removing the 31 names scoring 96 (and 95) drops the list: the next read
        # rebuilds it from a best-first search of the index.
        await ac.remove_names("big", [f"a{i:04d}" for i in range(3000) if i % 97 >= 95])
        assert await ac._command("ZLEXCOUNT", tops, b"[a\x00\x00", b"[a\x00\x00\xff") == 0
        best, truncated = await ac.suggest_best("big", "a", 3)
        assert not truncated and [s.score for s in best] == [94.0, 94.0, 94.0]
        assert await ac._command("ZLEXCOUNT", tops, b"[a\x00\x00", b"[a\x00\x00\xff") == 11

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


@pytest.mark.parametrize("first", ["suggest", "increment", "add", "remove"])
def test_an_index_written_by_the_previous_version_is_upgraded_in_place(redis_server, first):
    """The version before kept a score entry for every name (0 included), no
    positive-name entries, and lists without markers: whichever script touches such
    an index first converts it, and every answer after is exact."""
    import random

    rng = random.Random(first)
    index = {f"{rng.choice(['ab', 'Ac', 'b'])}{i}": float(rng.choice([0, 0, 0, 1, 2, 5, -3])) for i in range(300)}

    async def check(ac):
        k = ac._index("old")
        await ac._command("ZADD", k.lex, *[x for n in index for x in (0, member(n))])
        await ac._command("ZADD", k.scores, *[x for n, v in index.items() for x in (0.0 - v, member(n))])
        await ac._command("ZADD", k.tops, 0, b"a\x00\x00" + b"\x80" * 8 + member("ab1"), 0, b"b\x00\x00junk")
        if first == "increment":
            n = sorted(index)[7]
            index[n] += 4
            assert await ac.increment("old", n, 4) == index[n]
        elif first == "add":
            index["ab-new"] = 9.0
            assert await ac.add_names("old", [("ab-new", 9.0)]) == 1
        elif first == "remove":
            gone = sorted(index)[:5]
            assert await ac.remove_names("old", gone) == 5
            for n in gone:
                del index[n]
        for p in ["", "a", "ab", "ac", "b", "ab1"]:
            for limit in (1, 4, 9, 40):
                found, truncated = await ac.suggest_best("old", p, limit)
                want = sorted(matches(index, p), key=lambda x: (-index[x], normalize(x), x))[:limit]
                assert not truncated and [(f.name, f.score) for f in found] == [(x, index[x]) for x in want]
        zeros = await ac._command("ZCOUNT", k.scores, 0, 0)
        return zeros, await ac._command("ZRANGEBYLEX", k.tops, "-", "+", raw=True)

    zeros, lists = run(redis_server.url, check, rank_whole=20, top_kept=4)
    assert zeros == 0 and b"\xff" in lists and b"b\x00\x00junk" not in lists
    assert_lists(lists, index, 0, 4)


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
