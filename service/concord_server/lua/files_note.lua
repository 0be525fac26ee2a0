-- files_note.lua: how far a named worker's download of a file has got (DownloadRequest.worker),
-- for ListFiles and the web console. Informational: it grants nothing.
-- Kept only for one of the file's pending workers, so a group holds at most one entry
-- per pending worker and file, and MarkDone or the file's deletion (which know the
-- pending set) take it away; a note that comes after them keeps nothing.
-- KEYS: see files_common.lua
-- ARGV[3] n   ARGV[4] worker   ARGV[5] offset (the last response's)
-- ARGV[6] 1: into the (decompressed) text, a lines download / 0: into the stored bytes
-- Returns 1 when kept; 0 when the worker is not pending on the file (not one it was
-- sent to, done already, the file gone or not announced yet).
--! include common.lua
--! include files_common.lua
local n, worker = ARGV[3], ARGV[4]
if redis.call('SISMEMBER', fkey(n, 'pending'), worker) == 0 then
  return 0
end
local now_ms = clock()
redis.call('HSET', KEYS[3], download_field(n, worker), ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. fmt(now_ms))
return 1
