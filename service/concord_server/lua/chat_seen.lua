-- chat_seen.lua: several members' seen positions move at once (auto acks, batched per
-- server process), then messages every member has seen are deleted.
-- KEYS: see chat_common.lua
-- ARGV[4..] pairs: user, seen up to this id (non-members are skipped)
-- Returns how many positions moved.
--! include chat_common.lua
if redis.call('EXISTS', KEYS[3]) == 0 then
  return 0
end
local seq = tonumber(redis.call('HGET', KEYS[3], 'seq'))
local moved = 0
for i = 4, #ARGV, 2 do
  local seen = redis.call('ZSCORE', KEYS[1], ARGV[i])
  local up_to = math.min(tonumber(ARGV[i + 1]), seq)
  if seen and up_to > tonumber(seen) then
    redis.call('ZADD', KEYS[1], up_to, ARGV[i])
    moved = moved + 1
  end
end
if moved > 0 then
  drop_seen()
end
return moved
