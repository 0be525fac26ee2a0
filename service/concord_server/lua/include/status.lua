-- status.lua: reply statuses, one table per family (statuses.py).
-- GENERATED from statuses.py (python -m concord_server.statuses); do not edit.
local ACQUIRE = {BUSY = 0, ACQUIRED = 1, QUEUED = 2}
local HELD = {NOT_HELD = 0, HELD = 1}
local WITHDRAW = {LEFT_QUEUE = 0, KEPT = 1, PASSED_ON = 2, NOT_WAITING = -1, FAILED = -2}
local LIMIT = {MISMATCH = -1, UNSET = -2, BELOW_PERMITS = -3}
local CANCEL = {CANCELLED = 1, NO_SUCH_TASK = 0, LEASED = -1, FINISHED = -2}
local SCHEDULE = {OK = 1, NO_SUCH_SCHEDULE = 0, EXISTS = -1, STALE = -2}
local CREATE = {CREATED = 1, TAKEN = 0}
local CHAT = {OK = 1, NOT_A_MEMBER = 0, NO_SUCH_CHAT = -1, FULL = -2}
local UPLOAD = {STORED = 1, OVER_BOUND = 0, DROPPED = -1}
local DONE = {RECORDED = 1, DELETED = 2, NOT_A_WORKER = 0, NO_SUCH_FILE = -1, NOT_COMPLETE = -2}
local RATE = {ALLOWED = 1, REFUSED = 0}
