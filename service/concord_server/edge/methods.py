"""What the edge needs to know about services and methods, said once and derived
from the protos: Concord's services (full names, and the short names a token file
may use), which methods are open to every caller (health, reflection), which
may block, and which role a token needs for each (METHOD_ROLES)."""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.descriptor import FileDescriptor

from concord.autocomplete.v1 import autocomplete_pb2
from concord.chat.v1 import chat_pb2
from concord.election.v1 import election_pb2
from concord.files.v1 import files_pb2
from concord.lock.v1 import lock_pb2
from concord.queue.v1 import queue_pb2
from concord.ratelimit.v1 import ratelimit_pb2
from concord.rwlock.v1 import rwlock_pb2
from concord.semaphore.v1 import semaphore_pb2

OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def is_open_method(method: str) -> bool:
    """Health and reflection: Docker and grpcurl use them before anything else."""
    return method.startswith(OPEN_SERVICES)


def blocking_methods(files: Iterable[FileDescriptor]) -> frozenset[str]:
    """The unary methods whose request has a ``wait_timeout``: they may wait (and so
    hold a server slot) until something happens, as long as the client allows."""
    return frozenset(
        f"/{service.full_name}/{method.name}"
        for file in files for service in file.services_by_name.values() for method in service.methods
        if not method.client_streaming and not method.server_streaming
        and "wait_timeout" in method.input_type.fields_by_name)


_FILES = tuple(pb2.DESCRIPTOR for pb2 in (lock_pb2, semaphore_pb2, queue_pb2, chat_pb2, autocomplete_pb2, files_pb2,
                                          election_pb2, rwlock_pb2, ratelimit_pb2))

# Short name (the proto package's: "lock" for concord.lock.v1) -> full service name.
SERVICES = {file.package.split(".")[1]: service.full_name
            for file in _FILES for service in file.services_by_name.values()}

# Lock and semaphore Acquire, Dequeue, WaitTask, Campaign.
BLOCKING_METHODS = blocking_methods(_FILES)

# Roles of a token (auth.py), weakest first; a token may call a method whose role is at most its own.
ROLES = ("read-only", "read-write", "admin")
DEFAULT_ROLE = "read-write"

# Who may call what, the one table. Every method not named here needs read-write.
# read-only: the methods that change nothing (reading a chat's history or a task's
# state, watching a queue or a leader). FetchPending and Subscribe are not among
# them: they mark messages seen. admin: the methods that act on what others hold or
# change a resource's policy for everyone: take a lock from its holder, change a
# semaphore's limit, purge a queue, revive its dead tasks, pause it, set its policy or a group's
# rules, set, reset or delete a rate limit.
METHOD_ROLES: dict[str, dict[str, tuple[str, ...]]] = {
    "read-only": {
        "lock": ("Describe", "ListLocks"),
        "semaphore": ("Describe", "ListSemaphores"),
        "queue": ("Stats", "Peek", "ListDead", "ListQueues", "GetTask", "WaitTask", "GetQueuePolicy", "GetSchedule",
                  "ListSchedules", "WatchQueue", "GetGroup", "ListGroups", "SearchTasks"),
        "chat": ("ListChats", "GetHistory", "ListAllChats"),
        "autocomplete": ("SuggestRecent", "Suggest", "Count", "ListIndexes"),
        "files": ("Download", "ListFiles", "ListFileGroups"),
        "election": ("Leader", "Observe", "ListElections"),
        "rwlock": ("Describe", "ListReadWriteLocks"),
        "ratelimit": ("GetLimit", "ListLimits"),
    },
    "admin": {
        "lock": ("ForceRelease",),
        "semaphore": ("SetLimit",),
        "queue": ("Purge", "RetryDead", "SetQueuePolicy", "PauseQueue", "ResumeQueue", "SetGroupRules"),
        "ratelimit": ("SetLimit", "Reset", "DeleteLimit"),
    },
}


def _required_roles() -> dict[str, str]:
    """Full method name -> the role it needs; a name the protos do not have fails here, at import."""
    known = {f"/{service.full_name}/{method.name}": method
             for file in _FILES for service in file.services_by_name.values() for method in service.methods}
    required = {name: DEFAULT_ROLE for name in known}
    for role, services in METHOD_ROLES.items():
        for short, names in services.items():
            for name in names:
                full = f"/{SERVICES[short]}/{name}"
                if full not in known:
                    raise LookupError(f"METHOD_ROLES names {full}, which no proto defines")
                required[full] = role
    return required


REQUIRED_ROLE = _required_roles()


def role_allows(role: str, method: str) -> bool:
    """Whether a token of this role may call the method (open methods: always)."""
    if is_open_method(method):
        return True
    return ROLES.index(role) >= ROLES.index(REQUIRED_ROLE.get(method, DEFAULT_ROLE))
