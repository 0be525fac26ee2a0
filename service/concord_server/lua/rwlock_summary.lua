-- rwlock_summary.lua: one read-write lock as a listing shows it, in a few O(log N)
-- reads whatever its holders and waiters: the listing's cost per lock stays bounded
-- (Describe walks them all). Writes nothing; expired holders are skipped, not swept.
-- KEYS: see rwlock_common.lua
-- ARGV: only the common two
-- Returns {write-held 0/1, writer's owner or '', its fence or 0, its ms left or 0,
--   readers holding it, entries in its queue (waiters of dead servers included)}
--! include common.lua
--! include waiting.lua
--! include rwlock_common.lua
local now_ms = clock()
local live = '(' .. now_ms
local first = redis.call('ZRANGEBYSCORE', KEYS[1], live, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local holders = redis.call('ZCOUNT', KEYS[1], live, '+inf')
local waiters = redis.call('ZCARD', KEYS[3])
if first[1] then
  local mode, fence, owner = holder_info(first[1])
  if mode == WRITE then  -- a writer holds it alone
    return {1, owner, fence, tonumber(first[2]) - now_ms, 0, waiters}
  end
end
return {0, '', 0, 0, holders, waiters}
