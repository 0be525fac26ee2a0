-- names_add.lua: add names to an index, with scores where given.
-- KEYS: see names_common.lua   ARGV[1], ARGV[2]: see names_common.lua
-- ARGV[3...] pairs: member, score ('' = 0 for a new name, unchanged for an existing one)
-- Returns how many members were new.
--! include names_common.lua
local added = 0
for i = 3, #ARGV, 2 do
  local member, score = ARGV[i], ARGV[i + 1]
  if redis.call('ZADD', KEYS[1], 0, member) == 1 then
    added = added + 1
    local s = score == '' and 0 or -tonumber(score)
    redis.call('ZADD', KEYS[2], s, member)
    listed(member, nil, s)
  elseif score ~= '' then
    local old = redis.call('ZSCORE', KEYS[2], member)
    redis.call('ZADD', KEYS[2], -tonumber(score), member)
    local s = redis.call('ZSCORE', KEYS[2], member)
    if s ~= old then
      listed(member, old, s)
    end
  end
end
return added
