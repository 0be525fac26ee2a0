-- listing_prune.lua: drop index entries of resources a listing found gone
-- (primitives/listing.py), unless they were noted again since it read them.
-- KEYS[1] the index: hash name -> version (bumped by every note)
-- ARGV: name, version read, name, version read, ...
-- Returns how many entries were dropped.
local dropped = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    dropped = dropped + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return dropped
