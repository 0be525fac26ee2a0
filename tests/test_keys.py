"""Key names: one hash slot per resource, names with braces included, no collisions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from concord_server.keys import KeySpace, escape

NAMES = st.text(min_size=1, max_size=64)


@given(NAMES)
def test_all_keys_and_the_channel_of_a_lock_share_one_slot(name):
    k = KeySpace("concord").lock(name)
    slots = {key_slot(key.encode()) for key in [*k.keys, k.channel]}
    assert len(slots) == 1


def test_names_with_braces_keep_one_slot():
    for name in ("}", "{", "{}", "}abc{", "a{b}c", "{x}", "%7B"):
        k = KeySpace("concord").lock(name)
        assert len({key_slot(key.encode()) for key in [*k.keys, k.channel]}) == 1, name


@given(NAMES, NAMES)
def test_distinct_names_never_share_keys(a, b):
    if a != b:
        assert escape(a) != escape(b)
        assert KeySpace("p").lock(a).holder != KeySpace("p").lock(b).holder


def test_different_names_spread_across_slots():
    slots = {key_slot(KeySpace("concord").lock(f"orders:{i}").holder.encode()) for i in range(200)}
    assert len(slots) > 150


@given(NAMES)
def test_a_queue_history_shares_its_queue_slot(name):
    k = KeySpace("concord").tenant("acme").queue(name)
    assert len({key_slot(key.encode()) for key in [*k.keys, k.series]}) == 1


def test_the_server_keys_are_no_tenant_nor_the_shared_space_and_the_same_from_any():
    root = KeySpace("concord")
    server = (root.processes.index, root.processes.record("ab12"), root.history_sampler)
    assert root.tenant("acme").processes == root.processes  # the server's, whoever builds them
    assert root.tenant("acme").history_sampler == root.history_sampler
    assert key_slot(server[0].encode()) == key_slot(server[1].encode())  # the registry's script: one slot
    for key in server:  # a tenant's keys start "{concord@", the shared space's "{concord:"
        assert key.startswith("{concord#") and not key.startswith(("{concord@", "{concord:"))
    assert root.tenant("acme").lock_activity == "{concord@acme:lock-activity}" != root.lock_activity
