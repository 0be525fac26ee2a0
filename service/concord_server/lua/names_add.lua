-- names_add.lua: add names with scores to an index (autocomplete.py adds names
-- without a score with a plain ZADD: one zset entry each, nothing else).
-- KEYS: see names_common.lua   ARGV[1], ARGV[2]: see names_common.lua
-- ARGV[3...] pairs: member, score (0 included: a score of 0 is no score entry)
-- Returns how many members were new.
--! include names_common.lua
upgrade()
local added = 0
for i = 3, #ARGV, 2 do
  local member, s = ARGV[i], -tonumber(ARGV[i + 1])
  added = added + redis.call('ZADD', KEYS[1], 0, member)
  local old = redis.call('ZSCORE', KEYS[2], member)
  if s == 0 then
    if old then
      redis.call('ZREM', KEYS[2], member)
    end
    relist(member, old, nil)
  else
    redis.call('ZADD', KEYS[2], s, member)
    relist(member, old, s)
  end
end
mark()
return added
