-- files_upload.lua: the steps of an upload: begin, append a chunk, complete, abort.
-- KEYS: see files_common.lua
-- ARGV[3] action
--   begin     ARGV[4] n (a new file number)  ARGV[5] name  ARGV[6] sender  ARGV[7] chunk size
--             ARGV[8] lease ms
--   append    ARGV[4] n  ARGV[5] chunk  ARGV[6] bound (bytes)  ARGV[7] lease ms
--   complete  ARGV[4] n  ARGV[5..] workers
--   abort     ARGV[4] n: deletes it (the uploader failed before the announcement)
-- Returns UPLOAD.STORED (begin, append, complete; abort: deleted);
--   UPLOAD.OVER_BOUND (append): wait, the group's other files hold more than the bound
--                     (the lease is renewed);
--   UPLOAD.DROPPED (append, complete): the upload is gone (its lease ran out).
--! include status.lua
--! include common.lua
--! include files_common.lua
local action = ARGV[3]
local now_ms = clock()
sweep(now_ms)
if action == 'begin' then
  local n = ARGV[4]
  redis.call('HSET', fkey(n, 'meta'), 'name', ARGV[5], 'sender', ARGV[6], 'size', 0, 'chunks', 0,
    'chunk_size', ARGV[7], 'state', 'uploading', 'gzip', 0, 'created', now_ms,
    'lease_until', now_ms + tonumber(ARGV[8]))
  redis.call('ZADD', KEYS[1], now_ms, n)
  return UPLOAD.STORED
end
local n = ARGV[4]
local meta = fkey(n, 'meta')
if action == 'abort' then  -- the uploader failed before announcing: whatever state it reached
  if redis.call('EXISTS', meta) == 1 then
    delete_file(n)
  end
  return UPLOAD.STORED
end
if redis.call('HGET', meta, 'state') ~= 'uploading' then
  return UPLOAD.DROPPED
end
if action == 'append' then
  local chunk = ARGV[5]
  redis.call('HSET', meta, 'lease_until', now_ms + tonumber(ARGV[7]))
  local held = tonumber(redis.call('GET', KEYS[2]) or '0')
  local mine = tonumber(redis.call('HGET', meta, 'size'))
  if held > mine and held + #chunk > tonumber(ARGV[6]) then
    return UPLOAD.OVER_BOUND
  end
  local index = redis.call('HINCRBY', meta, 'chunks', 1) - 1
  redis.call('HSET', fkey(n, 'chunks'), index, chunk)
  redis.call('HINCRBY', meta, 'size', #chunk)
  redis.call('INCRBY', KEYS[2], #chunk)
  if index == 0 and string.sub(chunk, 1, 2) == '\031\139' then
    redis.call('HSET', meta, 'gzip', 1)
  end
  redis.call('SPUBLISH', CHANNEL, 'chunk ' .. n)
  return UPLOAD.STORED
end
-- complete
for i = 5, #ARGV do
  redis.call('SADD', fkey(n, 'pending'), ARGV[i])
end
redis.call('HSET', meta, 'state', 'complete')
redis.call('SPUBLISH', CHANNEL, 'complete ' .. n)
return UPLOAD.STORED
