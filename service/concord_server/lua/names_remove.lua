-- names_remove.lua: remove names (members) from an index.
-- KEYS: see names_common.lua
-- ARGV members
-- Returns how many were there.
--! include names_common.lua
local removed = 0
for _, member in ipairs(ARGV) do
  removed = removed + redis.call('ZREM', KEYS[1], member)
  redis.call('ZREM', KEYS[2], member)
end
return removed
