"""concord-server on Redis Cluster (--redis-cluster): three primaries of the backend's
binary, the server told one node's URL. Every service works unchanged; keys spread
over the nodes while each script's keys share a slot; wake-ups travel by sharded
pub/sub on the node owning the channel; slots that move mid-use keep working."""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Iterator

import pytest
import redis
from redis.crc import key_slot

import concord
from concord.lock.v1 import lock_pb2
from concord_server import config
from concord_server.keys import KeySpace
from support import RedisCluster, ServerProcess, backend_binary, unless_unavailable, wait_until

PREFIX = "concord"  # the cluster_server's key prefix (the default)
NASTY = ["plain", "{", "}", "{}", "}{", "a{b}c", "{tag}rest", "%7B", "%", "ünï{cødé}"]


@pytest.fixture
def client(cluster_server) -> Iterator[concord.Client]:
    with concord.Client(cluster_server.target) as c:
        yield c


def test_cluster_flag_needs_a_node_url():
    with pytest.raises(SystemExit):
        config.load(["--redis-cluster"], environ={})
    with pytest.raises(SystemExit):
        config.load([], environ={"CONCORD_REDIS_CLUSTER": "true", "CONCORD_REDIS_URL": "unix:///tmp/x.sock"})
    assert config.load(["--redis-url", "redis://h:1", "--redis-cluster"], environ={}).redis_cluster
    assert not config.load(["--redis-url", "redis://h:1"], environ={"CONCORD_REDIS_CLUSTER": "0"}).redis_cluster


def test_lock_waiter_is_woken_by_release_with_a_higher_fence(client, name):
    holder = client.lock(name, ttl=30).acquire()
    got: list[concord.Lease] = []
    t = threading.Thread(target=lambda: got.append(client.lock(name, ttl=30).acquire(timeout=20)))
    t.start()
    wait_until(lambda: client.lock(name).describe().waiters == 1, message="waiter queued")
    assert client.lock(name).acquire(timeout=0) is None
    holder.release()
    t.join(20)
    assert got and got[0] is not None and got[0].fencing_token > holder.fencing_token
    assert client.lock(name).describe().fencing_token == got[0].fencing_token
    got[0].release()
    assert not client.lock(name).describe().held


def test_listing_pages_through_every_primary(redis_cluster, client, name):
    """ListLocks lists locks on all three nodes (from the key space's index, one key)."""
    names = [f"{name}:{i}" for i in range(30)]
    leases = [client.lock(n, ttl=60).acquire() for n in names]
    assert len({redis_cluster.owner(KeySpace(PREFIX).lock(n).holder).port for n in names}) == 3
    listed, token, pages = set(), "", 0
    while True:
        page = client._service("lock").open("ListLocks")(
            lock_pb2.ListLocksRequest(page_token=token, page_size=1000), timeout=10)
        listed |= set(page.names)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert set(names) <= listed and pages >= 1
    for lease in leases:
        lease.release()


def test_summary_listings_read_each_resource_on_its_own_primary(redis_cluster, client, name):
    """ListReadWriteLocks, ListElections, ListIndexes and ListFileGroups: one index key,
    then one summary read per name on the node that owns it."""
    names = [f"{name}:{i}" for i in range(12)]
    keys = KeySpace(PREFIX)
    assert len({redis_cluster.owner(keys.rwlock(n).holders).port for n in names}) == 3
    leases = [client.rwlock(n, ttl=60).acquire("read") for n in names]
    terms = [client.election(n, ttl=60, candidate="c").elect(b"v").term for n in names]
    for n in names:
        client.autocomplete.add_names(n, ["a", "b"])
    client.chat.create(f"{name}-s", [f"{name}-w"], "files", chat_id=f"{name}-g")
    client.files.upload([b"12345"], f"{name}-g", sender=f"{name}-s", name="f")
    try:
        assert [(s.name, s.readers) for s in client.list_rwlocks() if s.name.startswith(name)] == [
            (n, 1) for n in sorted(names)]
        assert [(s.election, s.leader.term) for s in client.list_elections() if s.election.startswith(name)] == \
            sorted(zip(names, terms))
        assert [(s.index, s.size) for s in client.autocomplete.list_indexes() if s.index.startswith(name)] == [
            (n, 2) for n in sorted(names)]
        assert [(g.group, g.files, g.held_bytes) for g in client.files.list_groups() if g.group.startswith(name)] == [
            (f"{name}-g", 1, 5)]
    finally:
        for n, lease, term in zip(names, leases, terms):
            client.rwlock(n).release(lease)
            client.election(n).resign(term)


def test_semaphore_admits_a_waiter_when_a_permit_is_released(client, name):
    first, second = (client.semaphore(name, limit=2, ttl=30).acquire() for _ in range(2))
    assert first is not None and second is not None
    assert client.semaphore(name, limit=2).acquire(timeout=0) is None
    got: list = []
    t = threading.Thread(target=lambda: got.append(client.semaphore(name, limit=2, ttl=30).acquire(timeout=20)))
    t.start()
    wait_until(lambda: client.semaphore(name, limit=2).describe().waiters == 1, message="waiter queued")
    first.release()
    t.join(20)
    assert got and got[0] is not None
    assert client.semaphore(name, limit=2).describe().held == 2


def test_queue_blocked_get_is_woken_by_a_put_and_ack_settles(client, cluster_server, name):
    got: list[concord.Task] = []
    t = threading.Thread(target=lambda: got.extend(client.queue(name).get(timeout=20)))
    t.start()
    with concord.Client(cluster_server.target) as other:
        task_id = other.queue(name).put("wake", {"n": 1})
    t.join(20)
    assert [(x.task_id, x.json()) for x in got] == [(task_id, {"n": 1})]
    got[0].ack()
    stats = client.queue(name).stats()
    assert (stats.ready, stats.leased, stats.dead) == (0, 0, 0)


def test_chat_create_send_fetch_and_live_subscribe(client, name):
    a, b = f"{name}:a", f"{name}:b"
    chat_id = client.chat.create(a, [b], "hello")
    assert client.chat.send(chat_id, a, "second") == 2
    assert [m.body for m in client.chat.fetch_pending(b)] == ["hello", "second"]
    feed = client.chat.subscribe(b)
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(feed), daemon=True)
    reader.start()
    assert feed.wait_caught_up(10)
    client.chat.send(chat_id, a, "live")
    wait_until(lambda: got and got[-1].body == "live", message="the live message")
    feed.close()
    reader.join(5)
    assert [m.body for m in got] == ["live"]


def test_autocomplete_names_in_both_orders_and_recent_contacts(client, name):
    ac = client.autocomplete
    assert ac.add_names(name, [("Ada", 1.0), ("adam", 5.0), ("Alan", 3.0), "Bob"]) == 4
    assert [s.name for s in ac.suggest(name, "a")] == ["Ada", "adam", "Alan"]
    assert [s.name for s in ac.suggest(name, "a", order="score")] == ["adam", "Alan", "Ada"]
    for contact in ("Zoë", "zack", "Yann"):
        ac.add_recent(name, contact)
    assert ac.suggest_recent(name, "Z") == ["zack", "Zoë"]


def test_files_upload_and_lines(client, name):
    sender, worker = f"{name}:s", f"{name}:w"
    group = client.chat.create(sender, [worker], "files")
    data = b"".join(b"line %04d\n" % i for i in range(500))
    up = client.files.upload(io.BytesIO(data), group, sender=sender, name="a.log")
    assert up.size == len(data)
    assert [str(line) for line in client.files.lines(up.file_id)] == [f"line {i:04d}" for i in range(500)]


def _resource_keys(ks: KeySpace, name: str) -> dict[str, list[str]]:
    """Each script's key set (and channel) for ``name``, built by keys.py."""
    lk, sk, qk, ck = ks.lock(name), ks.semaphore(name), ks.queue(name), ks.chat(name)
    uk, nk, fk = ks.user(name), ks.name_index(name), ks.file_group(name)
    return {
        "lock": [*lk.keys, lk.channel],
        "semaphore": [*sk.keys, sk.channel],
        "queue": [*qk.keys, qk.channel, qk.task_prefix + "1", qk.dedupe("d")],
        "chat": [ck.members, ck.msgs, ck.meta, ck.channel],
        "user": list(uk),
        "recent": [ks.recent(name)],
        "names": list(nk),
        "files": [fk.files, fk.held, fk.progress, fk.channel, fk.prefix + "f:1:meta"],
    }


def test_names_spread_over_every_node_while_each_scripts_keys_share_a_slot(redis_cluster, client):
    ks = KeySpace(PREFIX)
    names = [f"spread-{i}" for i in range(50)] + [f"{n}-{uuid.uuid4().hex[:6]}" for n in NASTY]
    with redis_cluster.nodes[0].client() as node:
        for name in names:
            for kind, keys in _resource_keys(ks, name).items():
                slots = {key_slot(k.encode()) for k in keys}
                assert len(slots) == 1, (name, kind, keys)
                assert node.execute_command("CLUSTER", "KEYSLOT", keys[0]) == slots.pop()
        # Names that differ only in braces are different resources (escaping is injective).
        assert len({ks.lock(n).holder for n in NASTY}) == len(NASTY)
    owners = {redis_cluster.owner(ks.lock(n).holder).port for n in names[:50]}
    assert owners == {n.port for n in redis_cluster.nodes}
    # Through the server: each lock's holder lands on the node owning its slot.
    for name in names:
        lease = client.lock(name, ttl=30).acquire()
        owner = redis_cluster.owner(ks.lock(name).holder)
        with owner.client() as direct:
            assert direct.hget(ks.lock(name).holder, "lease") is not None, name
        lease.release()


def _shard_subscribers(node, channel: str) -> int:
    with node.client() as c:
        return c.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1]


def test_a_wake_up_travels_by_sharded_pubsub_on_the_owning_node(redis_cluster, client, tmp_path):
    """The waiter waits on the cluster_server; the holder releases through a second
    server process on the same cluster, so the grant reaches the waiter's process by
    the owner node's shard channel (a release by the waiter's own process wakes it
    from the script's reply and publishes nothing)."""
    name = f"wake-{uuid.uuid4().hex[:8]}"
    channel = KeySpace(PREFIX).lock(name).channel
    owner = redis_cluster.owner(channel)
    other = ServerProcess("--redis-url", redis_cluster.url, "--redis-cluster", "--key-prefix", PREFIX)
    other.start(tmp_path / "other-server.log")
    try:
        with concord.Client(other.target) as elsewhere:
            holder = elsewhere.lock(name, ttl=30).acquire()
            got: list[concord.Lease] = []
            t = threading.Thread(target=lambda: got.append(client.lock(name, ttl=30).acquire(timeout=20)))
            t.start()
            wait_until(lambda: _shard_subscribers(owner, channel) == 1, message="server subscribed on the owner")
            assert all(_shard_subscribers(n, channel) == 0 for n in redis_cluster.nodes if n is not owner)
            # Listen beside the server: the grant is published on the owner's shard channel.
            listener = redis.Redis.from_url(owner.url, decode_responses=True).pubsub()
            listener.ssubscribe(channel)
            assert listener.get_message(timeout=10)["type"] == "ssubscribe"
            holder.release()
            t.join(20)
            assert got and got[0] is not None
            message = wait_until(lambda: listener.get_message(timeout=1), message="the grant's notification")
            assert message["type"] == "smessage" and message["data"].split()[0] == got[0].token
            listener.close()
    finally:
        assert other.stop() == 0, other.log_text()


def test_a_url_with_an_acl_user_authenticates_on_every_discovered_node(redis_cluster, tmp_path):
    user, password = f"concord-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    for node in redis_cluster.nodes:
        with node.client() as c:
            c.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "&*", "+@all")
    url = redis_cluster.url.replace("redis://", f"redis://{user}:{password}@")
    server = ServerProcess("--redis-url", url, "--redis-cluster", "--key-prefix", "acl")
    server.start(tmp_path / "server.log")
    ks = KeySpace("acl")
    try:
        with concord.Client(server.target) as client:
            for node in redis_cluster.nodes:  # a lock on each node, with a woken waiter
                name = next(n for n in (f"acl-{i}" for i in range(1000))
                            if redis_cluster.owner(ks.lock(n).holder) is node)
                holder = client.lock(name, ttl=30).acquire()
                got: list = []
                t = threading.Thread(target=lambda: got.append(client.lock(name, ttl=30).acquire(timeout=20)))
                t.start()
                wait_until(lambda: _shard_subscribers(node, ks.lock(name).channel) == 1, message="waiter subscribed")
                with node.client() as c:
                    mine = [cl for cl in c.client_list() if cl["user"] == user]
                # Both the node's command pipeline and its pub/sub connection logged in as the user.
                assert {"ssubscribe", "evalsha"} <= {cl["cmd"] for cl in mine}, mine
                holder.release()
                t.join(20)
                assert got and got[0] is not None
    finally:
        assert server.stop() == 0, server.log_text()
        for node in redis_cluster.nodes:
            with node.client() as c:
                c.execute_command("ACL", "DELUSER", user)


@pytest.fixture
def moving_cluster(backend, tmp_path) -> Iterator[tuple[RedisCluster, ServerProcess]]:
    """A cluster and server of this test's own: its slots get moved."""
    cluster = RedisCluster(backend_binary(backend), tmp_path / "cluster")
    try:
        cluster.start()
        server = ServerProcess("--redis-url", cluster.url, "--redis-cluster", "--log-level", "DEBUG")
        server.start(tmp_path / "server.log")
        try:
            yield cluster, server
        finally:
            assert server.stop() == 0, server.log_text()
    finally:
        cluster.stop()


def _other(cluster: RedisCluster, node):
    return next(n for n in cluster.nodes if n is not node)


def test_locks_keep_working_while_and_after_their_slots_move(moving_cluster):
    cluster, server = moving_cluster
    ks = KeySpace(PREFIX)
    with concord.Client(server.target) as client:
        # MOVED: a held lock's slot moves with its keys; the server's map is stale.
        moved = "moved"
        lease = client.lock(moved, ttl=30).acquire()
        source = cluster.owner(ks.lock(moved).holder)
        target = _other(cluster, source)
        cluster.move_slot(key_slot(ks.lock(moved).holder.encode()), source, target)
        # Every node was told; gossip from a node told later may briefly disagree.
        wait_until(lambda: cluster.owner(ks.lock(moved).holder) is target, timeout=10, message="the move to settle")
        assert client.lock(moved).describe().fencing_token == lease.fencing_token
        lease.release()
        assert not client.lock(moved).describe().held

        # ASK: while a slot migrates, a key that is not on the source any more (or
        # not yet) is served by the importing node.
        user = "asked"
        recent = ks.recent(user)
        slot = key_slot(recent.encode())
        source = cluster.owner(recent)
        target = _other(cluster, source)
        cluster.begin_move(slot, source, target)
        assert client.autocomplete.add_recent(user, "Ada") == 1
        with redis.Redis.from_url(target.url, single_connection_client=True) as direct:
            direct.execute_command("ASKING")
            assert direct.exists(recent) == 1
        assert client.autocomplete.suggest_recent(user, "a") == ["Ada"]
        # A script over several keys that are missing on both sides is refused
        # (TRYAGAIN) until the move ends: retryable, and fine afterwards.
        lock_name = next(f"asked-{i}" for i in range(100_000) if key_slot(ks.lock(f"asked-{i}").holder.encode()) == slot)
        with pytest.raises(concord.Unavailable):
            client.lock(lock_name, ttl=30).acquire(timeout=0)
        cluster.finish_move(slot, source, target)
        assert client.autocomplete.suggest_recent(user, "a") == ["Ada"]
        assert client.lock(lock_name, ttl=30).acquire(timeout=0) is not None
    # The redirects were followed, not papered over by a re-read of the slot map.
    log = server.log_text()
    assert "moved to" in log and "asking" in log, log


def test_a_script_refused_tryagain_while_its_slot_moves_runs_once_the_move_ends(moving_cluster):
    """TRYAGAIN means the script did not run: the server sends it again for a moment,
    so a move that ends meanwhile is no error to the caller (issue 30: a Consume
    stream ended UNAVAILABLE on TRYAGAIN in the middle of a slot move)."""
    cluster, server = moving_cluster
    ks = KeySpace(PREFIX)
    with concord.Client(server.target) as client:
        name = "tryagain"
        slot = key_slot(ks.lock(name).holder.encode())
        source = cluster.owner(ks.lock(name).holder)
        target = _other(cluster, source)
        cluster.begin_move(slot, source, target)
        got: list[object] = []
        t = threading.Thread(target=lambda: got.append(client.lock(name, ttl=30).acquire(timeout=0)))
        t.start()
        wait_until(lambda: "TRYAGAIN" in server.log_text(), timeout=10, interval=0.002,
                   message="the acquire refused TRYAGAIN")
        cluster.finish_move(slot, source, target)
        t.join(10)
        assert got and isinstance(got[0], concord.Lease), got


def _held_with_a_waiter(client: concord.Client, name: str, ttl: float, wait: float):
    """The lock held (for ttl), and a thread waiting up to wait for it: (the holder's
    lease, the list the waiter's lease lands in, the thread)."""
    holder = client.lock(name, ttl=ttl).acquire()
    got: list[concord.Lease] = []
    t = threading.Thread(target=lambda: got.append(client.lock(name, ttl=30).acquire(timeout=wait)))
    t.start()
    return holder, got, t


def test_a_waiters_subscription_follows_its_slot_to_the_new_node(moving_cluster):
    cluster, server = moving_cluster
    name = "follow"
    keys = KeySpace(PREFIX).lock(name)
    with concord.Client(server.target) as client:
        holder, got, t = _held_with_a_waiter(client, name, ttl=30, wait=30)
        source = cluster.owner(keys.channel)
        wait_until(lambda: _shard_subscribers(source, keys.channel) == 1, message="subscribed on the owner")
        target = _other(cluster, source)
        cluster.move_slot(key_slot(keys.channel.encode()), source, target)
        wait_until(lambda: _shard_subscribers(target, keys.channel) == 1, timeout=20,
                   message="subscription moved to the new owner")
        assert _shard_subscribers(source, keys.channel) == 0
        holder.release()
        t.join(30)
        assert got and got[0] is not None and got[0].fencing_token > holder.fencing_token


def test_a_restarted_node_is_unavailable_while_down_then_serves_and_wakes_again(moving_cluster):
    cluster, server = moving_cluster
    name = "restart"
    keys = KeySpace(PREFIX).lock(name)
    with concord.Client(server.target) as client:
        holder, got, t = _held_with_a_waiter(client, name, ttl=120, wait=90)
        node = cluster.owner(keys.holder)
        wait_until(lambda: _shard_subscribers(node, keys.channel) == 1, message="subscribed on the owner")
        node.kill()
        with pytest.raises(concord.Unavailable):
            client.lock(name).describe()
        node.start()  # same port and data: the cluster takes it back with its slots and keys
        info = wait_until(lambda: unless_unavailable(client.lock(name).describe), timeout=30, message="served again")
        assert info.held and info.fencing_token == holder.fencing_token
        wait_until(lambda: _shard_subscribers(node, keys.channel) == 1, timeout=30, message="subscribed again")
        holder.release()
        t.join(60)
        assert got and got[0] is not None and got[0].fencing_token > holder.fencing_token
