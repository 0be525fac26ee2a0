-- files_list.lua: a group's files, oldest first, after sweeping dead uploads.
-- KEYS: see files_common.lua
-- ARGV: only the common two
-- Returns {held bytes, then per file: n, name, size, state, gzip, created ms, pending count,
-- then per pending worker: its name and its download entry ("<offset> <lines 0/1> <ms>",
-- files_note.lua; '' when it has none)}.
--! include common.lua
--! include files_common.lua
sweep(clock())
local reply = {tonumber(redis.call('GET', KEYS[2]) or '0')}
for _, n in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local f = redis.call('HMGET', fkey(n, 'meta'), 'name', 'size', 'state', 'gzip', 'created')
  local pending = redis.call('SMEMBERS', fkey(n, 'pending'))
  reply[#reply + 1] = n
  for i = 1, 5 do
    reply[#reply + 1] = f[i]
  end
  reply[#reply + 1] = #pending
  for _, w in ipairs(pending) do
    reply[#reply + 1] = w
    reply[#reply + 1] = redis.call('HGET', KEYS[3], download_field(n, w)) or ''
  end
end
return reply
