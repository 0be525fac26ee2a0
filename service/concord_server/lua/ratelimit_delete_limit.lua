-- ratelimit_delete_limit.lua: DeleteLimit: forget the key's stored limit and what it
-- counted (its concurrency permits too), in one step, so no check sees the limit gone
-- and the old state kept.
-- KEYS: the eight of one check (ratelimit_common.lua)
-- ARGV: none
-- Returns the stored limit before, {algorithm, rate, period ms, burst, drain}, or {}.
--! include common.lua
--! include ratelimit_common.lua
local k = check_keys(1)
local before = stored_limit(k)
redis.call('DEL', unpack(KEYS, 1, 8))
return before and limit_reply(before) or {}
