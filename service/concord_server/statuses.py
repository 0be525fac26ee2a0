"""Reply statuses: the named codes scripts return and primitives compare against.

One place declares them for both languages: each class below is a family of
statuses shared by the scripts named in its docstring, and lua/include/status.lua
declares the same tables (``local ACQUIRE = {BUSY = 0, ...}``) for the scripts that
``--! include status.lua``. That file is ``lua_source()`` written out; a test checks
that the two agree, so a status changes here and is regenerated, never edited apart:

    python -m concord_server.statuses > service/concord_server/lua/include/status.lua
"""

from __future__ import annotations


class Family:
    """A family of statuses: int class attributes, in UPPER case."""

    @classmethod
    def members(cls) -> dict[str, int]:
        return {k: v for k, v in vars(cls).items() if k.isupper() and isinstance(v, int)}

    @classmethod
    def codes(cls) -> tuple[int, ...]:
        """Every status of the family (for reply_shapes.Codes)."""
        return tuple(dict.fromkeys(cls.members().values()))


class ACQUIRE(Family):
    """lock_acquire, semaphore_acquire, rwlock_acquire: the first item of the reply."""
    BUSY = 0  # not free (no room), not queued
    ACQUIRED = 1
    QUEUED = 2


class HELD(Family):
    """lock_release/refresh/force_release, semaphore_release/refresh, rwlock_release/refresh, queue_settle."""
    NOT_HELD = 0  # the lease (permit) does not hold it: released, expired, settled
    HELD = 1  # it did, and the change was made


class WITHDRAW(Family):
    """lock_withdraw, semaphore_withdraw, rwlock_withdraw: what became of a waiter that gave up."""
    LEFT_QUEUE = 0
    KEPT = 1  # it had been granted, and keeps the grant
    PASSED_ON = 2  # it had been granted, and released the grant
    NOT_WAITING = -1  # neither queued nor holding
    FAILED = -2  # (semaphore) a lowered limit had failed it


class LIMIT(Family):
    """semaphore_acquire: why it refused before any ACQUIRE.* (so the codes differ from those)."""
    MISMATCH = -1  # the limit asked for is not the stored one (only SetLimit changes it); nothing changed
    UNSET = -2  # limit 0 asks for the stored limit, and there is none
    BELOW_PERMITS = -3  # limit 0 took the stored limit, which is below the permits asked for


class CANCEL(Family):
    """queue_remove with 'cancel'."""
    CANCELLED = 1  # a ready or delayed task: now cancelled (retained); a dead one: deleted
    NO_SUCH_TASK = 0
    LEASED = -1  # leased to a worker: not cancelled
    FINISHED = -2  # succeeded or cancelled already: not changed


class SCHEDULE(Family):
    """queue_schedule, queue_schedule_claim."""
    OK = 1  # (claim: the ticks were enqueued)
    NO_SUCH_SCHEDULE = 0
    EXISTS = -1  # (create) a schedule of that name exists: not changed
    STALE = -2  # (claim) the schedule changed, or another server claimed the tick


class CREATE(Family):
    """chat_create."""
    CREATED = 1
    TAKEN = 0  # the chat id exists


class CHAT(Family):
    """chat_send, chat_read, chat_member."""
    OK = 1
    NOT_A_MEMBER = 0
    NO_SUCH_CHAT = -1
    FULL = -2  # (join) the chat has its maximum of members


class UPLOAD(Family):
    """files_upload."""
    STORED = 1
    OVER_BOUND = 0  # (append) the group holds too much: wait for a file to be freed
    DROPPED = -1  # the upload's lease ran out between chunks


class DONE(Family):
    """files_done."""
    RECORDED = 1  # (or recorded before)
    DELETED = 2  # recorded, and it was the last worker: the file is deleted
    NOT_A_WORKER = 0
    NO_SUCH_FILE = -1
    NOT_COMPLETE = -2  # not announced yet


class RATE(Family):
    """ratelimit_check: each check's first item (else LIMIT.MISMATCH or LIMIT.UNSET)."""
    ALLOWED = 1  # the hits were taken (peeked: would be)
    REFUSED = 0  # not now: nothing taken (unless the limit drains over limit)


FAMILIES: tuple[type[Family], ...] = (ACQUIRE, HELD, WITHDRAW, LIMIT, CANCEL, SCHEDULE, CREATE, CHAT, UPLOAD, DONE,
                                      RATE)


def lua_source() -> str:
    """The text of lua/include/status.lua."""
    lines = ["-- status.lua: reply statuses, one table per family (statuses.py).",
             "-- GENERATED from statuses.py (python -m concord_server.statuses); do not edit."]
    for family in FAMILIES:
        items = ", ".join(f"{k} = {v}" for k, v in family.members().items())
        lines.append(f"local {family.__name__} = {{{items}}}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(lua_source(), end="")
