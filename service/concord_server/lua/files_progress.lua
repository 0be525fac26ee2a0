-- files_progress.lua: a group's files and where each worker stands on them, for the
-- web console. Writes nothing (files_list.lua sweeps dead uploads; this leaves that
-- to it and to the uploads). Bounded: the oldest ARGV[3] (<= 50) files, and of each
-- file at most ARGV[4] (<= 50) workers still pending and as many that are done
-- (by name; a bigger set is sampled with one SSCAN step), whatever the group holds.
-- Per worker: whether it marked the file done and, for a pending one that named itself
-- in a Download, how far that download has got (its entry in KEYS[3], files_note.lua).
-- KEYS: see files_common.lua
-- ARGV: the common two, then most files, then most workers per file and state
-- Returns {files in the group, held bytes, then per file: n, name, sender, size (so
--   far, while uploading), state, gzip 0/1, created ms, lease until ms, pending count,
--   done count, k, then k triples of worker, 1 done / 0 pending, its download entry
--   ("<offset> <lines 0/1> <ms>"; '' for none, and for a done worker)}
--! include common.lua
--! include files_common.lua
local most_files = math.min(math.max(tonumber(ARGV[3]) or 0, 0), 50)
local most_workers = math.min(math.max(tonumber(ARGV[4]) or 0, 0), 50)

local function some(key, count)
  local found
  if count <= most_workers then
    found = redis.call('SMEMBERS', key)
  else
    found = redis.call('SSCAN', key, 0, 'COUNT', most_workers)[2]
  end
  table.sort(found)
  local kept = {}
  for i = 1, math.min(#found, most_workers) do
    kept[i] = found[i]
  end
  return kept
end

local reply = {redis.call('ZCARD', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}
if most_files > 0 then
  for _, n in ipairs(redis.call('ZRANGE', KEYS[1], 0, most_files - 1)) do
    local f = redis.call('HMGET', fkey(n, 'meta'), 'name', 'sender', 'size', 'state', 'gzip', 'created', 'lease_until')
    local pending_n = redis.call('SCARD', fkey(n, 'pending'))
    local done_n = redis.call('SCARD', fkey(n, 'done'))
    local pending, done = some(fkey(n, 'pending'), pending_n), some(fkey(n, 'done'), done_n)
    for _, x in ipairs({n, f[1] or '', f[2] or '', tonumber(f[3] or '0'), f[4] or '', f[5] == '1' and 1 or 0,
                        tonumber(f[6] or '0'), tonumber(f[7] or '0'), pending_n, done_n, #pending + #done}) do
      reply[#reply + 1] = x
    end
    for _, w in ipairs(pending) do
      reply[#reply + 1] = w
      reply[#reply + 1] = 0
      reply[#reply + 1] = redis.call('HGET', KEYS[3], download_field(n, w)) or ''
    end
    for _, w in ipairs(done) do
      reply[#reply + 1] = w
      reply[#reply + 1] = 1
      reply[#reply + 1] = ''
    end
  end
end
return reply
