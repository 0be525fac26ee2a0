-- names_add.lua: add names to an index, with scores where given.
-- KEYS: see names_common.lua
-- ARGV pairs: member, score ('' = 0 for a new name, unchanged for an existing one)
-- Returns how many members were new.
--! include names_common.lua
local added = 0
for i = 1, #ARGV, 2 do
  local member, score = ARGV[i], ARGV[i + 1]
  added = added + redis.call('ZADD', KEYS[1], 0, member)
  if score == '' then
    redis.call('ZADD', KEYS[2], 'NX', 0, member)
  else
    redis.call('ZADD', KEYS[2], -tonumber(score), member)
  end
end
return added
