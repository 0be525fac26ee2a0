-- files_done.lua: a worker finished a file; the last one deletes it. Either way the
-- worker's download entry (files_note.lua) goes: it is no longer pending.
-- KEYS: see files_common.lua
-- ARGV[3] n   ARGV[4] worker
-- Returns DONE.RECORDED (or recorded before), DONE.DELETED (recorded, and it was the
-- last worker: the file is deleted), DONE.NOT_A_WORKER, DONE.NO_SUCH_FILE, or
-- DONE.NOT_COMPLETE (not announced yet).
--! include status.lua
--! include common.lua
--! include files_common.lua
local n, worker = ARGV[3], ARGV[4]
local state = redis.call('HGET', fkey(n, 'meta'), 'state')
if not state then
  return DONE.NO_SUCH_FILE
elseif state ~= 'complete' then
  return DONE.NOT_COMPLETE
end
if redis.call('SREM', fkey(n, 'pending'), worker) == 0 then
  return redis.call('SISMEMBER', fkey(n, 'done'), worker) == 1 and DONE.RECORDED or DONE.NOT_A_WORKER
end
redis.call('SADD', fkey(n, 'done'), worker)
redis.call('HDEL', KEYS[3], download_field(n, worker))
if redis.call('SCARD', fkey(n, 'pending')) == 0 then
  delete_file(n)
  return DONE.DELETED
end
return DONE.RECORDED
