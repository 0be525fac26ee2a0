-- files_read.lua: a file's state and some of its chunks (read only).
-- KEYS: see files_common.lua
-- ARGV[3] n   ARGV[4] first chunk index   ARGV[5] most chunks
-- Returns {} if there is no such file, else
-- {state, size, chunk_size, gzip, chunk ARGV[4], chunk ARGV[4] + 1, ...} (as many as exist).
--! include files_common.lua
local n = ARGV[3]
local f = redis.call('HMGET', fkey(n, 'meta'), 'state', 'size', 'chunk_size', 'gzip', 'chunks')
if not f[1] then
  return {}
end
local reply = {f[1], f[2], f[3], f[4]}
local first, stored = tonumber(ARGV[4]), tonumber(f[5])
for i = first, math.min(first + tonumber(ARGV[5]), stored) - 1 do
  reply[#reply + 1] = redis.call('HGET', fkey(n, 'chunks'), i)
end
return reply
