-- election_summary.lua: one election as a listing shows it, in O(1) reads: the
-- leader (its value cut to ARGV[3] bytes, so a page of listings stays small) and
-- the candidates' queue length. Writes nothing: a leadership whose TTL ran out is
-- gone with its key (PEXPIRE); a handover is left to the next script that settles.
-- KEYS: see election_common.lua
-- ARGV[3] most bytes of the leader's value to return
-- Returns {term (0: nobody leads), candidate, value (cut), value cut 0/1, pttl ms,
--   entries in the candidates' queue (candidates of dead servers included), now_ms}
--! include common.lua
local now_ms = clock()
local h = redis.call('HMGET', KEYS[1], 'fence', 'owner', 'value')
local candidates = redis.call('ZCARD', KEYS[2])
if not h[1] then
  return {0, '', '', 0, 0, candidates, now_ms}
end
local value, most = h[3] or '', tonumber(ARGV[3])
return {tonumber(h[1]), h[2] or '', string.sub(value, 1, most), #value > most and 1 or 0,
        redis.call('PTTL', KEYS[1]), candidates, now_ms}
