-- files_common.lua: helpers prepended to every files_*.lua script.
--
-- All keys of a group's files share the group's hash tag, so the bytes held for the
-- group are counted in the same atomic step that stores or deletes them:
--   KEYS[1] files  zset    file number -> created ms
--   KEYS[2] held   string  bytes the group's files hold
--   KEYS[3] progress hash  "<n> <worker>" -> "<offset> <lines 0/1> <ms>": how far a pending
--                          worker's download of file n has got (files_note.lua); only a
--                          pending worker has an entry, so MarkDone and delete_file,
--                          which know the pending set, take every entry away
-- and each file n has (named from ARGV[2], the group's key prefix):
--   <prefix>f:<n>:meta     hash  name sender size chunks chunk_size state gzip created lease_until
--   <prefix>f:<n>:chunks   hash  chunk index -> bytes (fixed chunk_size, the last shorter)
--   <prefix>f:<n>:pending  set   workers that have not marked it done
--   <prefix>f:<n>:done     set   workers that have
-- File numbers come from one counter for all groups (keys.KeySpace.file_ids), so a
-- group whose files are all done leaves no key behind and never reuses a number.
-- ARGV[1] the group's wake-up channel: "chunk <n>", "complete <n>", "freed"
-- ARGV[2] the group's key prefix

local CHANNEL, PREFIX = ARGV[1], ARGV[2]

local function fkey(n, part)
  return PREFIX .. 'f:' .. n .. ':' .. part
end

-- The field of worker w's download of file n in KEYS[3].
local function download_field(n, w)
  return n .. ' ' .. w
end

-- Its pending workers' download entries go with the file: one HDEL per pending worker,
-- as many as the DEL of its pending set below costs anyway.
local function delete_file(n)
  for _, w in ipairs(redis.call('SMEMBERS', fkey(n, 'pending'))) do
    redis.call('HDEL', KEYS[3], download_field(n, w))
  end
  local size = tonumber(redis.call('HGET', fkey(n, 'meta'), 'size') or '0')
  redis.call('DEL', fkey(n, 'meta'), fkey(n, 'chunks'), fkey(n, 'pending'), fkey(n, 'done'))
  redis.call('ZREM', KEYS[1], n)
  if redis.call('DECRBY', KEYS[2], size) <= 0 then
    redis.call('DEL', KEYS[2])
  end
  redis.call('SPUBLISH', CHANNEL, 'freed')
end

-- Uploads whose uploader went silent (its server died) are deleted, never announced.
local function sweep(now_ms)
  for _, n in ipairs(redis.call('ZRANGE', KEYS[1], 0, 999)) do
    local state, lease_until = unpack(redis.call('HMGET', fkey(n, 'meta'), 'state', 'lease_until'))
    if state == 'uploading' and tonumber(lease_until) < now_ms then
      delete_file(n)
    end
  end
end
