-- election_recent.lua: the latest changes of leadership, newest first, for the web
-- console. Writes nothing. Bounded: at most ARGV[3] (<= 50) entries of the history
-- stream the election keeps anyway (election_common.lua: the last KEEP_CHANGES),
-- each value cut to ARGV[4] bytes.
-- KEYS: see election_common.lua
-- ARGV: the common two, then how many changes (at most 50), then most bytes of a value
-- Returns {now_ms, then per change, newest first: n, term (0: nobody led from then on),
--   candidate, value (cut), value cut 0/1, when it was recorded (ms)}
--! include common.lua
local limit = math.min(math.max(tonumber(ARGV[3]) or 0, 0), 50)
local most = tonumber(ARGV[4])
local now_ms = clock()
local reply = {now_ms}
if limit > 0 then
  for _, e in ipairs(redis.call('XREVRANGE', KEYS[7], '+', '-', 'COUNT', limit)) do
    local f = {}
    for i = 1, #e[2], 2 do
      f[e[2][i]] = e[2][i + 1]
    end
    local value = f.v or ''
    reply[#reply + 1] = tonumber(string.match(e[1], '^(%d+)'))
    reply[#reply + 1] = tonumber(f.t or '0')
    reply[#reply + 1] = f.c or ''
    reply[#reply + 1] = string.sub(value, 1, most)
    reply[#reply + 1] = #value > most and 1 or 0
    reply[#reply + 1] = tonumber(f.ms or '0')
  end
end
return reply
