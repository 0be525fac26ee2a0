-- election_campaign.lua: lead now, or join the candidates' FIFO queue. The
-- uncontended path is this one script, one round trip.
-- KEYS: see election_common.lua (1-5 are a lock's: lock_common.lua)
-- ARGV[3] lease   ARGV[4] ttl ms   ARGV[5] candidate   ARGV[6] value
-- ARGV[7] wait ms (0 = try once)   ARGV[8] server process id   ARGV[9] liveness ms
-- Returns {status, term, ms, now_ms}:
--   ACQUIRE.ACQUIRED  elected; ms = the leadership's TTL
--   ACQUIRE.BUSY      another leads, not queued; ms = its remaining TTL
--   ACQUIRE.QUEUED    ms = the leader's remaining TTL (when to look again)
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
--! include election_common.lua
local lease, ttl, candidate, value = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local wait, proc, liveness = tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9])
local now_ms, now_us = clock()

local holder = redis.call('HGET', KEYS[1], 'lease')
if not holder then
  -- Leadership nobody holds goes to the head of a live queue first: no barging.
  grant_next(now_ms, now_us)
  holder = redis.call('HGET', KEYS[1], 'lease')
  if not holder then
    local term = grant(lease, candidate, ttl, now_us)
    redis.call('HSET', KEYS[1], 'value', value)
    announce(now_ms)
    return {ACQUIRE.ACQUIRED, term, ttl, now_ms}
  end
end
announce(now_ms)
if holder == lease then
  -- A retried call (reply lost) whose lease already leads.
  return {ACQUIRE.ACQUIRED, tonumber(redis.call('HGET', KEYS[1], 'fence')), redis.call('PTTL', KEYS[1]), now_ms}
end
local pttl = redis.call('PTTL', KEYS[1])
if wait <= 0 then
  return {ACQUIRE.BUSY, 0, pttl, now_ms}
end

enqueue(Q, lease, now_ms, now_us, wait, proc, liveness, 1, ttl, candidate)
redis.call('HSET', KEYS[6], lease, value)
-- The queue keys outlive their last candidate's deadline, then vanish by themselves.
local keep = wait + liveness
for _, i in ipairs({2, 3, 4, 6}) do
  if redis.call('PTTL', KEYS[i]) < keep then
    redis.call('PEXPIRE', KEYS[i], keep)
  end
end
return {ACQUIRE.QUEUED, 0, pttl, now_ms}
