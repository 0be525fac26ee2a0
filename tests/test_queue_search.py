"""SearchTasks end to end (a real server, the real client): each filter, paging over a
queue with more tasks than one call looks at, a sparse search that pages to its end,
a page token that stays right while tasks come and go, and tenants that never see
each other's tasks (bad input: tests/test_queue_validation.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import concord
from concord_server.primitives.task_search import EXAMINE
from support import ServerProcess

MANY = EXAMINE * 2 + EXAMINE // 2  # more tasks than two calls look at (not a multiple: the last call ends the walk)


def _put(queue: concord.Queue, tasks: list[concord.NewTask]) -> list[str]:
    ids: list[str] = []
    for first in range(0, len(tasks), 1000):  # --queue-max-batch
        ids += [e.task_id for e in queue.put_many(tasks[first:first + 1000])]
    return ids


def _dead(queue: concord.Queue, type: str, payload: bytes, error: str) -> str:
    """A task killed at its one attempt with error."""
    handle = queue.put(type, payload, max_attempts=1, priority=1000)  # taken first
    (task,) = queue.get(1, lease_ttl=30)
    assert task.task_id == handle.task_id
    queue.nack(task, error, retryable=False)
    return task.task_id


def _ids(queue: concord.Queue, **filters) -> list[str]:
    return [t.task_id for t in queue.search_all(**filters)]


def test_each_filter_finds_its_tasks(client, name):
    q = client.queue(name)
    png = q.put("image.resize", b'{"file": "cat.png"}')
    jpg = q.put("image.crop", b'{"file": "dog.jpg"}')
    later = q.put("mail.send", b'{"to": "ada"}', delay=600)
    dead = _dead(q, "mail.send", b'{"to": "bob"}', "SMTP said: Mailbox FULL")
    leased_id = q.put("mail.digest", b"{}", priority=1000)
    (leased,) = q.get(1, lease_ttl=60)
    assert leased.task_id == leased_id
    assert _ids(q, task_id=png) == [png]
    assert _ids(q, task_id=png, type="mail.send") == []  # every filter must match
    assert _ids(q, task_id="0000000fffff") == []
    assert _ids(q, type="mail.send") == [later, dead]  # by state: delayed before dead
    assert sorted(_ids(q, type_prefix="image.")) == sorted([png, jpg])
    assert _ids(q, type_prefix="imag", payload=b"dog") == [jpg]
    assert _ids(q, states=["leased"]) == [leased_id]
    assert _ids(q, states=["dead"]) == [dead]
    assert _ids(q, states=["delayed", "dead"]) == [later, dead]
    assert _ids(q, error="mailbox full") == [dead]  # ASCII letters in either case
    assert _ids(q, error="mailbox empty") == []
    assert _ids(q, payload='"to": "ada"') == [later]
    (found,) = q.search(error="full").tasks
    assert (found.state, found.type, found.last_error, found.payload, found.attempt) == (
        "dead", "mail.send", "SMTP said: Mailbox FULL", b'{"to": "bob"}', 1)
    leased.ack()
    assert _ids(q, states=["succeeded"]) == [leased_id]  # retained finished tasks too
    assert _ids(q, states=["cancelled"]) == []
    q.cancel(png)
    assert _ids(q, states=["cancelled"]) == [png]
    assert sorted(_ids(q, states=["succeeded", "cancelled"])) == sorted([leased_id, png])
    q.pause()
    assert [t.state for t in q.search(task_id=jpg).tasks] == ["waiting"]  # as GetTask shows it
    assert _ids(q, states=["waiting"]) == [jpg]


def test_paging_covers_a_queue_larger_than_one_call_looks_at(client, name):
    q = client.queue(name)
    ids = _put(q, [concord.NewTask("bulk", f"task {i}".encode()) for i in range(MANY)])
    pages, seen = 0, []
    token = ""
    while True:
        page = q.search(type="bulk", page_size=100, page_token=token)
        assert len(page.tasks) <= 100 and page.examined <= EXAMINE
        seen += [t.task_id for t in page.tasks]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert pages >= MANY // 100 and seen == ids  # each once, in the ready set's order


def test_a_sparse_search_pages_to_its_end_in_bounded_steps(client, name):
    q = client.queue(name)
    tasks = [concord.NewTask("bulk", b"x" * 50) for _ in range(MANY)]
    for i in (10, EXAMINE + 7, MANY - 1):
        tasks[i] = concord.NewTask("bulk", b"needle in x")
    ids = _put(q, tasks)
    first = q.search(payload=b"needle")
    assert first.next_page_token and first.examined == EXAMINE  # one bounded call, and more to come
    found, calls, token = [], 0, ""
    while True:
        page = q.search(payload=b"needle", page_token=token)
        assert page.examined <= EXAMINE
        found += [t.task_id for t in page.tasks]
        calls += 1
        token = page.next_page_token
        if not token:
            break
    assert found == [ids[10], ids[EXAMINE + 7], ids[MANY - 1]]
    assert calls == -(-MANY // EXAMINE)  # the whole queue, EXAMINE tasks at a time
    assert _ids(q, payload=b"no such bytes") == []


def test_tasks_that_stay_put_are_found_once_while_others_come_and_go(client, name):
    q = client.queue(name)
    ids = _put(q, [concord.NewTask("t", b"") for _ in range(300)])
    staying = set(ids[1::2])
    gone = ids[0::2]
    seen: list[str] = []
    token, pages = "", 0
    while True:
        page = q.search(states=["ready"], page_size=25, page_token=token)
        seen += [t.task_id for t in page.tasks]
        # Between pages: the tasks on either side of the position go, new ones come.
        for task_id in gone[pages * 6:pages * 6 + 6]:
            q.cancel(task_id)
        q.put("t", b"new")
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert all(seen.count(t) == 1 for t in staying), "a task that stayed put was missed or seen twice"
    assert len(seen) == len(set(seen))


@pytest.fixture(scope="module")
def tenant_server(redis_server, tmp_path_factory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("search-tenants")
    (folder / "tokens.toml").write_text("".join(
        f'[[tokens]]\ntoken = "{token}"\ntenant = "{tenant}"\nrole = "{role}"\n\n'
        for token, tenant, role in (("search-acme-writer-0123456789", "acme", "read-write"),
                                    ("search-acme-reader-0123456789", "acme", "read-only"),
                                    ("search-globex-admin-0123456789", "globex", "admin"))))
    server = ServerProcess("--redis-url", redis_server.url, "--auth-tokens", str(folder / "tokens.toml"))
    server.start(folder / "server.log")
    yield server
    assert server.stop() == 0, server.log_text()


def test_a_read_only_token_searches_its_own_tenant_and_no_other(tenant_server, name):
    with concord.Client(tenant_server.target, token="search-acme-writer-0123456789") as writer, \
            concord.Client(tenant_server.target, token="search-acme-reader-0123456789") as reader, \
            concord.Client(tenant_server.target, token="search-globex-admin-0123456789") as other:
        task_id = writer.queue(name).put("secret", b"acme data")
        _dead(writer.queue(name), "secret", b"acme data", "acme error")
        assert len(_ids(reader.queue(name), type="secret")) == 2  # a read: read-only may
        assert _ids(other.queue(name)) == []
        assert _ids(other.queue(name), task_id=task_id) == []
        assert _ids(other.queue(name), error="acme") == []
        assert _ids(other.queue(name), payload=b"acme") == []
