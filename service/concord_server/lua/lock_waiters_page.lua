-- lock_waiters_page.lua: one page of the lock's waiters in FIFO order, for the web
-- console's pager (GET /api/locks/<name>/waiters). Writes nothing. Bounded: looks at
-- ARGV[4] queue entries (at most 100) from position ARGV[3]; entries of waiters that
-- are gone (their deadline passed, their process died) are skipped, not replaced, so
-- a page may hold fewer, and the next page starts at ARGV[3] + ARGV[4].
-- KEYS: see lock_common.lua
-- ARGV: the common two, then the position of the first entry (0: the head), how many
-- Returns {now_ms, entries queued (ZCARD), then position, owner, waiting since (ms)
--   per live waiter of the page}
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local now_ms = clock()
local offset = math.max(tonumber(ARGV[3]) or 0, 0)
local limit = math.min(math.max(tonumber(ARGV[4]) or 0, 0), 100)
local reply = {now_ms, redis.call('ZCARD', Q.queue)}
if limit > 0 then
  local page = redis.call('ZRANGE', Q.queue, offset, offset + limit - 1, 'WITHSCORES')
  for i = 1, #page, 2 do
    local _, _, owner = live(Q, redis.call('HGET', Q.waiters, page[i]), now_ms)
    if owner then
      reply[#reply + 1] = offset + (i - 1) / 2
      reply[#reply + 1] = owner
      reply[#reply + 1] = math.floor(tonumber(page[i + 1]) / 1000)
    end
  end
end
return reply
