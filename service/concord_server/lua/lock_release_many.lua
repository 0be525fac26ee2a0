-- lock_release_many.lua: free every given lock the lease holds and hand each to its
-- next waiter.
-- KEYS: five per lock (lock_acquire_many.lua)
-- ARGV[1] unused   ARGV[2] fence retention ms   ARGV[3] lease   ARGV[4..] each lock's channel
-- Returns {the 1-based positions of the locks the lease did not hold...} ({}: all released).
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local now_ms, now_us = clock()
local not_held = {}
for i = 1, #KEYS / 5 do
  local L = lock_at((i - 1) * 5)
  if redis.call('HGET', L.holder, 'lease') == ARGV[3] then
    redis.call('DEL', L.holder)
    grant_next_of(L, ARGV[3 + i], now_ms, now_us)
  else
    not_held[#not_held + 1] = i
  end
end
return not_held
