-- lock_refresh_many.lua: reset the TTL of every given lock, if the lease holds them all.
-- KEYS: five per lock (lock_acquire_many.lua)
-- ARGV[1] unused   ARGV[2] fence retention ms   ARGV[3] lease   ARGV[4] ttl ms
-- Returns {HELD.HELD, now_ms} refreshed all; {HELD.NOT_HELD, position...} the 1-based
-- positions of the locks the lease does not hold (none was refreshed).
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local not_held = {HELD.NOT_HELD}
for i = 1, #KEYS / 5 do
  if redis.call('HGET', lock_at((i - 1) * 5).holder, 'lease') ~= ARGV[3] then
    not_held[#not_held + 1] = i
  end
end
if #not_held > 1 then
  return not_held
end
for i = 1, #KEYS / 5 do
  redis.call('PEXPIRE', lock_at((i - 1) * 5).holder, ARGV[4])
end
local now_ms = clock()
return {HELD.HELD, now_ms}
