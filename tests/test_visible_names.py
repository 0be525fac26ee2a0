"""Names are made of visible characters, in every service (issue 30, item 10).

A name with a right-to-left override (U+202E), a zero-width joiner or space (U+200D,
U+200B), a byte order mark (U+FEFF) or any other invisible, formatting, private-use
or unassigned character, or with whitespace at either end, looks like another name
in a listing or a log: each service answers INVALID_ARGUMENT naming the field and
writes nothing. Labels (owners, dedupe keys) follow the character rule but keep
their spaces. The rules live in one place (api/validation.py); this checks that
every service's name fields go through it, and that real names still work.
"""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2

from concord.autocomplete.v1 import autocomplete_pb2 as ac
from concord.autocomplete.v1 import autocomplete_pb2_grpc as ac_grpc
from concord.chat.v1 import chat_pb2 as chat
from concord.chat.v1 import chat_pb2_grpc as chat_grpc
from concord.election.v1 import election_pb2 as el
from concord.election.v1 import election_pb2_grpc as el_grpc
from concord.files.v1 import files_pb2 as files
from concord.files.v1 import files_pb2_grpc as files_grpc
from concord.lock.v1 import lock_pb2 as lock
from concord.lock.v1 import lock_pb2_grpc as lock_grpc
from concord.queue.v1 import queue_pb2 as queue
from concord.queue.v1 import queue_pb2_grpc as queue_grpc
from concord.rwlock.v1 import rwlock_pb2 as rw
from concord.rwlock.v1 import rwlock_pb2_grpc as rw_grpc
from concord.semaphore.v1 import semaphore_pb2 as sem
from concord.semaphore.v1 import semaphore_pb2_grpc as sem_grpc
from support import assert_rejected_and_nothing_written

TTL = duration_pb2.Duration(seconds=5)

INVISIBLE = {
    "U+202E right-to-left override": "invoice\u202etxt.exe",
    "U+200D zero width joiner": "a\u200db",
    "U+FEFF byte order mark": "\ufeffa",
    "U+200B zero width space": "a\u200b",
    "U+2066 left-to-right isolate": "\u2066a",
    "U+E0041 tag": "a\U000e0041",
    "U+2029 paragraph separator": "a\u2029b",
    "U+F8FF private use": "a\uf8ff",
}
NAMES = {**INVISIBLE, "leading space": " a", "trailing space": "a ", "trailing no-break space": "a\u00a0"}

# (stub class, method, request for a name, field): one name field of each service.
FIELDS = {
    "lock": (lock_grpc.LockServiceStub, "Acquire", lambda n: lock.AcquireRequest(name=n, ttl=TTL), "name"),
    "semaphore": (sem_grpc.SemaphoreServiceStub, "Acquire",
                  lambda n: sem.AcquireRequest(name=n, limit=2, ttl=TTL), "name"),
    "rwlock": (rw_grpc.ReadWriteLockServiceStub, "Acquire",
               lambda n: rw.AcquireRequest(name=n, mode=rw.MODE_READ, ttl=TTL), "name"),
    "election": (el_grpc.ElectionServiceStub, "Campaign",
                 lambda n: el.CampaignRequest(election=n, candidate="c", ttl=TTL), "election"),
    "queue": (queue_grpc.QueueServiceStub, "Enqueue",
              lambda n: queue.EnqueueRequest(queue=n, tasks=[queue.NewTask(type="t")]), "queue"),
    "task type": (queue_grpc.QueueServiceStub, "Enqueue",
                  lambda n: queue.EnqueueRequest(queue="q", tasks=[queue.NewTask(type=n)]), "tasks[0].type"),
    "schedule": (queue_grpc.QueueServiceStub, "CreateSchedule", lambda n: queue.CreateScheduleRequest(
        queue="q", name=n, spec=queue.ScheduleSpec(cron="0 0 1 1 *", type="t")), "name"),
    "consume queues": (queue_grpc.QueueServiceStub, "Dequeue",
                       lambda n: queue.DequeueRequest(queues=["q", n]), "queues"),
    "chat sender": (chat_grpc.ChatServiceStub, "CreateChat",
                    lambda n: chat.CreateChatRequest(sender=n, recipients=["b"], message="hi"), "sender"),
    "chat recipient": (chat_grpc.ChatServiceStub, "CreateChat",
                       lambda n: chat.CreateChatRequest(sender="a", recipients=["b", n], message="hi"), "recipients"),
    "chat user": (chat_grpc.ChatServiceStub, "JoinChat", lambda n: chat.JoinChatRequest(chat_id="c", user=n), "user"),
    "autocomplete index": (ac_grpc.AutocompleteServiceStub, "AddNames",
                           lambda n: ac.AddNamesRequest(index=n, names=[ac.NameEntry(name="x")]), "index"),
    "autocomplete names": (ac_grpc.AutocompleteServiceStub, "AddNames", lambda n: ac.AddNamesRequest(
        index="i", names=[ac.NameEntry(name=f"x{i}") for i in range(50)] + [ac.NameEntry(name=n)]), "names"),
    "recent contact": (ac_grpc.AutocompleteServiceStub, "AddRecent",
                       lambda n: ac.AddRecentRequest(user="u", contact=n), "contact"),
    "file group": (files_grpc.FileServiceStub, "Upload", lambda n: iter([files.UploadRequest(
        header=files.UploadHeader(group=n, sender="s", name="f.txt"))]), "group"),
    "file worker": (files_grpc.FileServiceStub, "MarkDone",
                    lambda n: files.MarkDoneRequest(file_id="1:g", worker=n), "worker"),
    "download worker": (files_grpc.FileServiceStub, "Download",
                        lambda n: files.DownloadRequest(file_id="1:g", worker=n), "worker"),
}


@pytest.fixture(scope="module")
def channel(validation_server):
    with grpc.insecure_channel(validation_server.target) as ch:
        yield ch


@pytest.mark.parametrize("bad", NAMES, ids=str)
@pytest.mark.parametrize("where", FIELDS, ids=str)
def test_names_with_invisible_characters_or_spaces_at_the_ends_are_refused(channel, redis_sync, where, bad):
    stub_class, method, request, field = FIELDS[where]
    call = getattr(stub_class(channel), method)
    assert_rejected_and_nothing_written(lambda: call(request(NAMES[bad]), timeout=10), redis_sync, field)


@pytest.mark.parametrize("bad", INVISIBLE, ids=str)
def test_labels_refuse_invisible_characters_too(channel, redis_sync, bad):
    q = queue_grpc.QueueServiceStub(channel)
    assert_rejected_and_nothing_written(lambda: q.Enqueue(queue.EnqueueRequest(queue="q", tasks=[queue.NewTask(
        type="t", dedupe_key="k" + INVISIBLE[bad])]), timeout=10), redis_sync, "tasks[0].dedupe_key")
    locks = lock_grpc.LockServiceStub(channel)
    assert_rejected_and_nothing_written(lambda: locks.Acquire(lock.AcquireRequest(
        name="n", ttl=TTL, owner=INVISIBLE[bad]), timeout=10), redis_sync, "owner")


def test_visible_names_with_inner_spaces_accents_and_emoji_work(channel):
    """What people write stays valid: inner spaces (no-break and ideographic ones
    too), combining accents, emoji, scripts written right to left."""
    locks, q = lock_grpc.LockServiceStub(channel), queue_grpc.QueueServiceStub(channel)
    for name in ("a b", "Ana\u00a0Lima", "山田\u3000太郎", "e\u0301t\u00e9", "🔒🇩🇪", "שלום", "مرحبا", "owner: {x}"):
        got = locks.Acquire(lock.AcquireRequest(name=name, ttl=TTL, owner=" spaced owner "), timeout=10)
        assert got.acquired, name
        locks.Release(lock.ReleaseRequest(name=name, lease=got.lease), timeout=10)
        q.Enqueue(queue.EnqueueRequest(queue=name, tasks=[queue.NewTask(type=name, dedupe_key=" k ")]), timeout=10)
        q.Purge(queue.PurgeRequest(queue=name), timeout=10)
