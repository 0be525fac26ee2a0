-- names_remove.lua: remove names (members) from an index.
-- KEYS: see names_common.lua   ARGV[1], ARGV[2]: see names_common.lua
-- ARGV[3...] members
-- Returns how many were there. An index left empty loses its score zset and lists.
--! include names_common.lua
upgrade()
local removed = 0
for i = 3, #ARGV, 1000 do
  local members = {unpack(ARGV, i, math.min(i + 999, #ARGV))}
  removed = removed + redis.call('ZREM', KEYS[1], unpack(members))
  local scores = redis.call('ZMSCORE', KEYS[2], unpack(members))
  for j, m in ipairs(members) do
    if scores[j] and redis.call('ZREM', KEYS[2], m) == 1 then
      relist(m, scores[j], nil)
    end
  end
end
if removed > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2], KEYS[3])
end
return removed
