"""AutocompleteService end to end, and its bad input."""

from __future__ import annotations

import grpc
import pytest

import concord
from concord.autocomplete.v1 import autocomplete_pb2 as pb
from concord.autocomplete.v1 import autocomplete_pb2_grpc
from support import assert_rejected_and_nothing_written


def test_recent_contacts(client, name):
    ac = client.autocomplete
    for contact in ["Thomas Müller", "thomas", "Zoë", "Anna Thom", "Thomas Müller"]:
        ac.add_recent(name, contact)
    assert ac.suggest_recent(name, "THO") == ["Thomas Müller", "thomas"]
    assert ac.suggest_recent(name, "thom", include_infix=True) == ["Thomas Müller", "thomas", "Anna Thom"]
    assert ac.suggest_recent(name, "zoe") == []  # "ë" is not "e": accents are kept, case is not
    assert ac.suggest_recent(name, "zoë") == ["Zoë"] and ac.suggest_recent(name, "ZOË") == ["Zoë"]
    assert ac.remove_recent(name, "thomas") and not ac.remove_recent(name, "thomas")
    assert ac.suggest_recent(name, "", limit=2) == ["Thomas Müller", "Anna Thom"]


def test_recent_contacts_keep_the_newest_hundred(client, name):
    ac = client.autocomplete
    for i in range(105):
        size = ac.add_recent(name, f"c{i:03d}")
    assert size == 100
    got = ac.suggest_recent(name, "c", limit=1000)
    assert got == [f"c{i:03d}" for i in range(104, 4, -1)]


def test_name_index(client, name):
    ac = client.autocomplete
    assert ac.add_names(name, ["Åsa", "asa", ("Astrid", 12.0), "Ｂｏｂ", "漢字"]) == 5
    assert [s.name for s in ac.suggest(name, "ÅS")] == ["Åsa"]
    assert [s.name for s in ac.suggest(name, "as")] == ["asa", "Astrid"]
    assert [s.name for s in ac.suggest(name, "bob")] == ["Ｂｏｂ"]
    assert ac.increment_score(name, "asa", 20) == 20.0
    best = ac.suggest(name, "", limit=2, order="score")
    assert [(s.name, s.score) for s in best] == [("asa", 20.0), ("Astrid", 12.0)] and not best.truncated
    assert ac.count(name) == 5 and ac.count(name, "a") == 2
    assert ac.remove_names(name, ["asa"]) == 1
    with pytest.raises(concord.NameNotFound) as err:
        ac.increment_score(name, "asa")
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_names_that_are_valid_but_not_printable_are_taken(client, name):
    """A no-break or ideographic space or a long name send a batch down the
    servicer's name-by-name check, which takes them like any other name."""
    ac = client.autocomplete
    odd = ["Ana\u00a0Lima", "山田\u3000太郎", "ü" * 128, "Bo"]
    assert ac.add_names(name, odd) == 4
    assert sorted(s.name for s in ac.suggest(name, "", limit=10)) == sorted(odd)
    assert ac.remove_names(name, odd) == 4


async def test_async_autocomplete(aclient, name):
    ac = aclient.autocomplete
    await ac.add_names(name, ["Émile", "emily"])
    assert [s.name for s in await ac.suggest(name, "EM")] == ["emily"]
    assert [s.name for s in await ac.suggest(name, "ém")] == ["Émile"]
    await ac.add_recent(name, "Émile")
    assert await ac.suggest_recent(name, "é") == ["Émile"]


@pytest.fixture
def stub(validation_server):
    with grpc.insecure_channel(validation_server.target) as ch:
        yield autocomplete_pb2_grpc.AutocompleteServiceStub(ch)


BAD_REQUESTS = {
    "AddRecent user empty": ("AddRecent", pb.AddRecentRequest(contact="c"), "user"),
    "AddRecent contact empty": ("AddRecent", pb.AddRecentRequest(user="u"), "contact"),
    "AddRecent contact 257 bytes": ("AddRecent", pb.AddRecentRequest(user="u", contact="c" * 257), "contact"),
    "AddRecent contact control char": ("AddRecent", pb.AddRecentRequest(user="u", contact="a\tb"), "contact"),
    "SuggestRecent limit too large": ("SuggestRecent", pb.SuggestRecentRequest(user="u", limit=1001), "limit"),
    "SuggestRecent prefix control char": ("SuggestRecent", pb.SuggestRecentRequest(user="u", prefix="\x00"), "prefix"),
    "AddNames index empty": ("AddNames", pb.AddNamesRequest(names=[pb.NameEntry(name="n")]), "index"),
    "AddNames no names": ("AddNames", pb.AddNamesRequest(index="i"), "names"),
    "AddNames too many": ("AddNames", pb.AddNamesRequest(index="i", names=[pb.NameEntry(name="n")] * 10_001), "names"),
    "AddNames name too long": ("AddNames", pb.AddNamesRequest(index="i", names=[pb.NameEntry(name="é" * 129)]),
                               "names"),
    "AddNames score not finite": ("AddNames", pb.AddNamesRequest(index="i", names=[pb.NameEntry(name="n",
                                                                                              score=float("nan"))]),
                                  "names.score"),
    # One bad name among good ones (the servicer checks a batch in one pass first).
    "AddNames a name with a control char": ("AddNames", pb.AddNamesRequest(index="i", names=[
        pb.NameEntry(name="Ana"), pb.NameEntry(name="Bo\x85b"), pb.NameEntry(name="Zoë")]), "names"),
    "AddNames an empty name": ("AddNames", pb.AddNamesRequest(index="i", names=[
        pb.NameEntry(name="Ana"), pb.NameEntry(name="")]), "names"),
    "AddNames a long name among short": ("AddNames", pb.AddNamesRequest(index="i", names=[
        pb.NameEntry(name="Ana"), pb.NameEntry(name="\U0001F600" * 65)]), "names"),
    "RemoveNames no names": ("RemoveNames", pb.RemoveNamesRequest(index="i"), "names"),
    "RemoveNames a name with a control char": ("RemoveNames", pb.RemoveNamesRequest(index="i",
                                                                                    names=["Ana", "a\tb"]), "names"),
    "IncrementScore infinite": ("IncrementScore", pb.IncrementScoreRequest(index="i", name="n", delta=float("inf")),
                                "delta"),
    "Suggest limit too large": ("Suggest", pb.SuggestRequest(index="i", limit=1001), "limit"),
    "Suggest bad order": ("Suggest", pb.SuggestRequest(index="i", order=9), "order"),
    "Count index control char": ("Count", pb.CountRequest(index="i\n"), "index"),
}


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=str)
def test_bad_input_is_invalid_argument_and_writes_nothing(stub, redis_sync, case):
    method, request, field = BAD_REQUESTS[case]
    assert_rejected_and_nothing_written(lambda: getattr(stub, method)(request, timeout=10), redis_sync, field)
