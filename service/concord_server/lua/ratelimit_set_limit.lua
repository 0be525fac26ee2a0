-- ratelimit_set_limit.lua: SetLimit: store the key's limit, kept with no expiry.
-- What the key counted stays (a new algorithm starts from full).
-- KEYS: the six of one check (ratelimit_common.lua)
-- ARGV: algorithm, rate, period ms, burst, drain (1/0)
-- Returns the stored limit before, {algorithm, rate, period ms, burst, drain}, or {}.
--! include common.lua
--! include ratelimit_common.lua
local k = check_keys(1)
local before = stored_limit(k)
redis.call('HSET', k.limit, 'a', ARGV[1], 'r', ARGV[2], 'p', ARGV[3], 'b', ARGV[4], 'd', ARGV[5])
return before and limit_reply(before) or {}
