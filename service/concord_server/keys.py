"""Every Redis key and channel name Concord uses is built here.

All keys of one resource share a Redis Cluster hash tag, ``{<prefix>:<kind>:<name>}``,
so each script touches a single slot. The name is escaped so that a ``{`` or ``}``
inside it can never end the tag early or leave it empty: ``%`` -> ``%25``,
``{`` -> ``%7B``, ``}`` -> ``%7D``. The escaping is injective, so distinct names
never share keys.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_ESCAPES = str.maketrans({"%": "%25", "{": "%7B", "}": "%7D"})


def escape(name: str) -> str:
    return name.translate(_ESCAPES)


def unescape(name: str) -> str:
    return name.replace("%7B", "{").replace("%7D", "}").replace("%25", "%")


def validate_prefix(prefix: str) -> str:
    if not prefix or len(prefix) > 64 or any(c in prefix for c in "{}% \t\r\n"):
        raise ValueError("key prefix must be 1-64 characters without braces, '%' or spaces")
    return prefix


def seen_marker(channel: str) -> str:
    """A key beside a resource's wake-up channel (same hash tag, so the same node) that a
    server writes, expiring in a second, so that its WAIT covers a change another
    connection made, such as a grant handed to its waiter (store/replica_acks.py)."""
    return channel.rsplit(":", 1)[0] + ":seen"


class LockKeys(NamedTuple):
    """KEYS of every lock script, in this order, plus the wake-up channel."""

    holder: str  # hash: lease, owner, fence; PEXPIRE = the lock's TTL
    queue: str  # zset: waiter lease -> arrival time (us), FIFO order
    waiters: str  # hash: waiter lease -> "ttl_ms deadline_ms proc owner"
    procs: str  # hash: server process id -> alive-until (ms); dead processes' waiters are skipped
    fence: str  # string: last fencing token handed out
    channel: str  # shard channel: "lease fence expires_ms" when a waiter is granted

    @property
    def keys(self) -> list[str]:
        return [self.holder, self.queue, self.waiters, self.procs, self.fence]


class ElectionKeys(NamedTuple):
    """KEYS of every election script, in this order, plus its two channels. The first
    five are a lock's (LockKeys: the leader is the lock's holder, its term the
    fencing token), so elections run on the lock's FIFO queue and grants."""

    holder: str  # hash: lease, owner (the candidate), fence (the term), value; PEXPIRE = TTL
    queue: str  # zset: candidate lease -> arrival time (us), FIFO order
    waiters: str  # hash: candidate lease -> "deadline_ms proc 1 ttl_ms candidate"
    procs: str  # hash: server process id -> alive-until (ms)
    fence: str  # string: the last term handed out
    values: str  # hash: queued candidate's lease -> the value it will lead with
    history: str  # stream: the changes of leadership, ids "<n>-0"; its name is the observers' channel
    said: str  # hash: n (last change's number), term (the term it announced; 0: nobody leads)
    channel: str  # shard channel: "lease term expires_ms" when a candidate is elected

    @property
    def keys(self) -> list[str]:
        return [self.holder, self.queue, self.waiters, self.procs, self.fence, self.values, self.history, self.said]


class RWLockKeys(NamedTuple):
    """KEYS of every read-write lock script, in this order, plus the wake-up channel."""

    holders: str  # zset: holder lease -> expires at (ms); expired ones are swept by each script
    info: str  # hash: holder lease -> "mode fence owner" (mode 1 read, 2 write)
    queue: str  # zset: waiter lease -> arrival time (us), FIFO order
    waiters: str  # hash: waiter lease -> "deadline_ms proc mode ttl_ms owner" (waiting.lua)
    procs: str  # hash: server process id -> alive-until (ms)
    fence: str  # string: last fencing token handed out (readers' and writers')
    channel: str  # shard channel: "lease fence expires_ms" when a waiter is granted

    @property
    def keys(self) -> list[str]:
        return [self.holders, self.info, self.queue, self.waiters, self.procs, self.fence]


class RateLimitKeys(NamedTuple):
    """KEYS of one check of every rate-limit script, in this order
    (lua/include/ratelimit_common.lua): the stored limit and one state key per
    algorithm, so a key's algorithm is read from its limit inside the script."""

    limit: str  # hash: a r p b d = algorithm, rate, period ms, burst, drain; no expiry
    gcra: str  # string: the theoretical arrival time (ms), expiring when the key is full again
    bucket: str  # hash: t tokens, at ms
    log: str  # zset: one member per hit, score = its time (ms)
    window: str  # hash: w period index, c this period's count, p the last period's
    fixed: str  # hash: w period index, c count
    permits: str  # zset: concurrency permit -> its expiry (ms)
    held: str  # hash: concurrency permit -> units it holds, '*' -> their total
    queue: str  # zset: Wait's waiters, token -> arrival (us), FIFO; expiring with the last one's deadline
    waiters: str  # hash: waiter token -> deadline (ms)
    channel: str  # shard channel: "<n>" (the waiters left) when the head took its hits or left, or a permit came back

    @property
    def keys(self) -> list[str]:
        """KEYS of one check (ratelimit_check.lua, ratelimit_set_limit.lua)."""
        return list(self[:8])

    @property
    def wait_keys(self) -> list[str]:
        """KEYS of ratelimit_wait.lua."""
        return [*self.keys, self.queue, self.waiters]

    @property
    def state(self) -> list[str]:
        """What Reset deletes: what the key counted (not its stored limit, nor its waiters)."""
        return [self.gcra, self.bucket, self.log, self.window, self.fixed, self.permits, self.held]


class SemaphoreKeys(NamedTuple):
    """KEYS of every semaphore script, in this order, plus the wake-up channel."""

    holders: str  # zset: permit id -> expires at (ms); expired ones are swept by each script
    permits: str  # hash: permit id -> "permits owner"
    queue: str  # zset: waiter id -> arrival time (us), FIFO order
    waiters: str  # hash: waiter id -> "permits ttl_ms deadline_ms proc owner"
    procs: str  # hash: server process id -> alive-until (ms)
    meta: str  # hash: limit (the one in force), held (permits held now)
    channel: str  # shard channel: "permit_id expires_ms" when a waiter is granted

    @property
    def keys(self) -> list[str]:
        return [self.holders, self.permits, self.queue, self.waiters, self.procs, self.meta]


class QueueKeys(NamedTuple):
    """KEYS of every queue script, in this order, plus the channel and key prefixes."""

    ready: str  # zset: ungrouped ready task id -> order score (ready_ms - priority * weight)
    since: str  # zset: every ready task id -> ms it became ready (the oldest-ready age)
    delayed: str  # zset: task id -> ready-at ms
    leased: str  # zset: task id -> lease expiry ms
    dead: str  # zset: task id -> died-at ms
    seq: str  # string: last task number handed out
    paused: str  # string: "1" while the queue is paused (nothing is leased)
    done: str  # zset: task id -> finished ms, for retained succeeded and cancelled tasks
    policy: str  # hash: the queue's policy (retention); absent fields take the defaults
    schedules: str  # zset: schedule name -> its next tick (ms), +inf while paused
    events: str  # stream "<n>-0" -> task event (WatchQueue); also the shard channel rung with n
    event_seq: str  # string: the last event's n
    lanes: str  # zset: lane ('' the queue's own, else a group) -> pass: the lanes that may lease now
    held: str  # zset: group -> ms it may lease again (its rate limit is spent)
    groups: str  # zset: group -> 0, the groups with ready or leased tasks or rules of their own
    flow: str  # hash: the state flow control keeps (queue_common.lua): qt vt lp qh
    channel: str  # shard channel: "<n>" when n tasks became ready
    finished: str  # shard channel: "<task id>" when that task finished, "*" when many did
    task_prefix: str  # + task id: hash with the task's fields
    dedupe_prefix: str  # + dedupe key: string -> the task id holding that key
    schedule_prefix: str  # + schedule name: hash with the schedule's fields
    throttle_prefix: str  # + throttle key: string -> the task id accepted this period (PX the period)
    debounce_prefix: str  # + debounce key: string -> the task id that later ones replace while it is pending
    group_prefix: str  # + group: hash with the group's rules and counts (queue_common.lua)
    group_ready_prefix: str  # + group: zset of its ready tasks, task id -> order score (as ready)
    series: str  # list: the console's samples of the queue's counts, newest first (primitives/queue_history.py)

    @property
    def keys(self) -> list[str]:
        return [self.ready, self.since, self.delayed, self.leased, self.dead, self.seq, self.paused, self.done,
                self.policy, self.schedules, self.events, self.event_seq, self.lanes, self.held, self.groups,
                self.flow]

    def dedupe(self, key: str) -> str:
        return self.dedupe_prefix + key

    def throttle(self, key: str) -> str:
        return self.throttle_prefix + key

    def debounce(self, key: str) -> str:
        return self.debounce_prefix + key


class ScheduleIndexKeys(NamedTuple):
    """Which queues have schedules, across tenants; kept apart from the queues' own slots."""

    queues: str  # set: "<key space prefix> <queue name>" of each queue with schedules
    channel: str  # shard channel: such a member when that queue's schedules changed


class ProcessKeys(NamedTuple):
    """The process registry (process_registry.py): server-wide, in a key space of the
    server's own that no tenant (``@``) nor the shared space (``:`` after the prefix)
    can build a key of; both keys in one slot."""

    index: str  # zset: process id -> its last beat (ms, Redis clock)
    record_prefix: str  # + process id: string, the process's record (JSON), PX a few beats

    def record(self, process_id: str) -> str:
        return self.record_prefix + process_id


class ChatKeys(NamedTuple):
    """KEYS of every chat script, in this order, plus the wake-up channel."""

    members: str  # zset: user -> id of the last message the member has seen
    msgs: str  # stream: "<message id>-0" -> s (sender), b (body), t (sent ms)
    meta: str  # hash: seq (last message id), bytes (bodies kept)
    channel: str  # shard channel: "<message id>" per message

    @property
    def keys(self) -> list[str]:
        return [self.members, self.msgs, self.meta]


class UserKeys(NamedTuple):
    chats: str  # set: the chats the user is a member of (an index; the chat's members zset decides)
    channel: str  # shard channel: "add <chat>" / "remove <chat>" when that set changes


class NameIndexKeys(NamedTuple):
    """KEYS of every names_*.lua script, in this order."""

    lex: str  # zset: members "normalized\\0\\0original" at score 0, in byte order
    scores: str  # zset: member -> minus its score (ascending = best first); only scores other than 0
    tops: str  # zset: positive-scored names, and cached best-score lists per prefix (lua/names_common.lua)

    @property
    def keys(self) -> list[str]:
        return [self.lex, self.scores, self.tops]


class FileGroupKeys(NamedTuple):
    """KEYS of every files_*.lua script, plus the channel and the files' key prefix."""

    files: str  # zset: file number -> created ms
    held: str  # string: bytes the group's files hold
    progress: str  # hash: "<n> <worker>" -> "<offset> <lines 0/1> <ms>", a pending worker's download
    channel: str  # shard channel: "chunk <n>", "complete <n>", "freed"
    prefix: str  # + "f:<n>:meta|chunks|pending|done": one file's keys, in the group's slot

    @property
    def keys(self) -> list[str]:
        return [self.files, self.held, self.progress]


class ConsoleSessionKeys(NamedTuple):
    """The web console's sessions of one API token (console/sessions.py), in one slot:
    the token's index and each session's record share the hash tag."""

    index: str  # zset: session -> created at (us, Redis clock), oldest first; expires with the newest
    record: str  # prefix of a session's hash (+ the SHA-256 of its secret): d t r c x a

    def session(self, secret_hash: str) -> str:
        return self.record + secret_hash


_TENANT = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def validate_tenant(tenant: str) -> str:
    if not _TENANT.fullmatch(tenant):
        raise ValueError(f"tenant {tenant!r} must be 1-64 characters of A-Z a-z 0-9 _ . -")
    return tenant


class KeySpace:
    def __init__(self, prefix: str) -> None:
        self.prefix = validate_prefix(prefix)

    def tenant(self, tenant: str) -> KeySpace:
        """The keys of one tenant (edge/auth.py): ``{<prefix>@<tenant>:<kind>:<name>}``. A
        tenant's name has no ':', and the shared space puts ':' right after the prefix,
        so no two tenants, nor a tenant and the shared space, can build the same key."""
        space = KeySpace.__new__(KeySpace)
        space.prefix = f"{self.prefix}@{validate_tenant(tenant)}"
        return space

    def server_limits(self) -> KeySpace:
        """The server's own limits (edge/limits.py's shared tenant rate):
        ``{<prefix>#limits:<kind>:<name>}``, a key space no tenant (``@``) nor the shared
        space (``:`` after the prefix) can build a key of."""
        space = KeySpace.__new__(KeySpace)
        space.prefix = f"{self.prefix}#limits"
        return space

    @property
    def root(self) -> str:
        """The server's prefix, without a tenant's ``@<tenant>``."""
        return self.prefix.split("@")[0]

    @property
    def processes(self) -> ProcessKeys:
        """The process registry of every server on this prefix: ``{<prefix>#processes}``
        (the same from any tenant's key space: it is the server's, not theirs)."""
        t = "{%s#processes}" % self.root
        return ProcessKeys(t, f"{t}:")

    @property
    def history_sampler(self) -> str:
        """string: the process that samples the queues' histories now (console/sampler.py),
        PX a few ticks: ``{<prefix>#history}:sampler``, the server's own."""
        return "{%s#history}:sampler" % self.root

    @property
    def lock_activity(self) -> str:
        """list: this key space's lock handoffs and deadlocks broken per interval, newest
        first (primitives/lock_activity.py); its own slot."""
        return "{%s:lock-activity}" % self.prefix

    def server_console(self) -> KeySpace:
        """The web console's own keys (its sessions, console/sessions.py):
        ``{<prefix>#console:<kind>:<name>}``, out of every tenant's reach as
        server_limits is."""
        space = KeySpace.__new__(KeySpace)
        space.prefix = f"{self.root}#console"
        return space

    def console_sessions(self, token_id: str) -> ConsoleSessionKeys:
        """The console sessions made from one token (``token_id``: a hash of its digest)."""
        t = self.tag("token", token_id)
        return ConsoleSessionKeys(f"{t}:sessions", f"{t}:s:")

    def tag(self, kind: str, name: str) -> str:
        return "{%s:%s:%s}" % (self.prefix, kind, escape(name))

    @property
    def usage(self) -> str:
        """hash: queue -> task payload bytes counted for it, '*' -> their total: the
        key space's storage account (quotas.py); its own slot."""
        return "{%s:usage}" % self.prefix

    def index(self, kind: str) -> str:
        """hash: name -> version of every resource of one kind that may exist in this
        key space (primitives/listing.py); its own slot, apart from the resources'."""
        return "{%s:index:%s}" % (self.prefix, kind)

    def lock(self, name: str) -> LockKeys:
        t = self.tag("lock", name)
        return LockKeys(f"{t}:holder", f"{t}:queue", f"{t}:waiters", f"{t}:procs", f"{t}:fence", f"{t}:wake")

    def election(self, name: str) -> ElectionKeys:
        t = self.tag("elect", name)
        return ElectionKeys(f"{t}:holder", f"{t}:queue", f"{t}:waiters", f"{t}:procs", f"{t}:fence",
                            f"{t}:values", f"{t}:history", f"{t}:said", f"{t}:wake")

    def rwlock(self, name: str) -> RWLockKeys:
        t = self.tag("rw", name)
        return RWLockKeys(f"{t}:holders", f"{t}:info", f"{t}:queue", f"{t}:waiters", f"{t}:procs", f"{t}:fence",
                          f"{t}:wake")

    def ratelimit(self, key: str) -> RateLimitKeys:
        t = self.tag("rl", key)
        return RateLimitKeys(f"{t}:limit", f"{t}:gcra", f"{t}:bucket", f"{t}:log", f"{t}:window", f"{t}:fixed",
                             f"{t}:permits", f"{t}:held", f"{t}:queue", f"{t}:waiters", f"{t}:wake")

    def semaphore(self, name: str) -> SemaphoreKeys:
        t = self.tag("sem", name)
        return SemaphoreKeys(f"{t}:holders", f"{t}:permits", f"{t}:queue", f"{t}:waiters", f"{t}:procs",
                             f"{t}:meta", f"{t}:wake")

    def chat(self, chat_id: str) -> ChatKeys:
        t = self.tag("chat", chat_id)
        return ChatKeys(f"{t}:members", f"{t}:msgs", f"{t}:meta", f"{t}:wake")

    def user(self, user: str) -> UserKeys:
        t = self.tag("user", user)
        return UserKeys(f"{t}:chats", f"{t}:wake")

    def recent(self, user: str) -> str:
        """list: the user's recent contacts, most recent first."""
        return self.tag("recent", user)

    def name_index(self, index: str) -> NameIndexKeys:
        t = self.tag("names", index)
        return NameIndexKeys(f"{t}:lex", f"{t}:scores", f"{t}:tops")

    def file_group(self, group: str) -> FileGroupKeys:
        t = self.tag("files", group)
        return FileGroupKeys(f"{t}:files", f"{t}:held", f"{t}:progress", f"{t}:wake", f"{t}:")

    @property
    def file_ids(self) -> str:
        """string: the counter behind file numbers (all groups share it)."""
        return "{%s:file-ids}" % self.prefix

    @property
    def waits_for(self) -> str:
        """hash: who waits for which locks (primitives/deadlocks.py), one for the key space."""
        return "{%s:waits-for}" % self.prefix

    @property
    def chat_ids(self) -> str:
        """string: the counter behind server-assigned chat ids."""
        return "{%s:chat-ids}" % self.prefix

    def queue(self, name: str) -> QueueKeys:
        t = self.tag("queue", name)
        return QueueKeys(f"{t}:ready", f"{t}:since", f"{t}:delayed", f"{t}:leased", f"{t}:dead", f"{t}:seq",
                         f"{t}:paused", f"{t}:done", f"{t}:policy", f"{t}:schedules", f"{t}:events",
                         f"{t}:event-seq", f"{t}:lanes", f"{t}:held", f"{t}:groups", f"{t}:flow", f"{t}:wake",
                         f"{t}:finished", f"{t}:task:", f"{t}:dedupe:", f"{t}:schedule:", f"{t}:throttle:",
                         f"{t}:debounce:", f"{t}:group:", f"{t}:group-ready:", f"{t}:series")

    @property
    def schedule_index(self) -> ScheduleIndexKeys:
        """The one index of queues with schedules, for every tenant: its keys sit
        under the prefix before any tenant's '@', so one ticker per process finds
        them all (primitives/schedule_ticker.py)."""
        t = "{%s:schedules}" % self.prefix.split("@")[0]
        return ScheduleIndexKeys(t, f"{t}:changed")

    def index_entry(self, queue: str) -> str:
        """The schedule index's member for one of this key space's queues."""
        return f"{self.prefix} {queue}"
