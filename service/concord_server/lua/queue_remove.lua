-- queue_remove.lua: cancel one task, or delete tasks in bulk, that no worker holds.
-- KEYS: see queue_common.lua
-- ARGV[7] what: cancel | delete_dead | purge | purge_with_dead
-- ARGV[8] task id (cancel) or batch size (purge); delete_dead: ARGV[8..] task ids
-- Returns for cancel CANCEL.CANCELLED (a ready or delayed task is now cancelled, kept under the
-- retention; a dead one is deleted), or CANCEL.NO_SUCH_TASK, CANCEL.LEASED, CANCEL.FINISHED
-- (nothing changed); for delete_dead {how many of the ids named dead tasks, now deleted as
-- cancel deletes them; the others are left as they are, 0}; for purge {deleted, 1 if more
-- remain (call again) else 0}.
-- purge deletes ready and delayed tasks; purge_with_dead also dead and retained finished
-- (succeeded, cancelled) ones. Their dedupe keys go with them (not kept for the window). A
-- purge_with_dead that leaves the queue holding no task at all (none leased either) also
-- deletes its event stream, event counter and flow state (WatchQueue sees the numbers
-- restart as a gap). What stays: the task counter (KEYS[6], one short string), so a task id is never
-- handed out twice in a queue, and the operator's settings (policy, paused, schedules).
--! include status.lua
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
announce(sweep(now_ms))
local what = ARGV[7]
local from = {ready = KEYS[2], delayed = KEYS[3], dead = KEYS[5], done = KEYS[8]}
if what == 'cancel' then
  local id = ARGV[8]
  local state = redis.call('HGET', task_key(id), 'state')
  if not state then
    return CANCEL.NO_SUCH_TASK
  elseif state == 'leased' then
    return CANCEL.LEASED
  elseif state == 'succeeded' or state == 'cancelled' then
    return CANCEL.FINISHED
  end
  if state == 'ready' then
    lane_remove(id, redis.call('HGET', task_key(id), 'grp') or '', now_ms)
  else
    redis.call('ZREM', from[state], id)
  end
  event(now_ms, 'cancelled', id)
  if state == 'dead' then
    forget(id)
  else
    retire(id, false, now_ms, {'state', 'cancelled'})
  end
  return CANCEL.CANCELLED
end
if what == 'delete_dead' then
  -- Only tasks still dead: one retried meanwhile is not cancelled instead.
  local deleted = 0
  for i = 8, #ARGV do
    local id = ARGV[i]
    if redis.call('ZREM', KEYS[5], id) == 1 then
      event(now_ms, 'cancelled', id)
      forget(id)
      deleted = deleted + 1
    end
  end
  return {deleted, 0}
end
local budget = tonumber(ARGV[8])
local deleted = 0
local states = {'ready', 'delayed'}
if what == 'purge_with_dead' then
  states[3] = 'dead'
  states[4] = 'done'
end
for _, state in ipairs(states) do
  local key = from[state]
  local ids = redis.call('ZRANGE', key, 0, budget - deleted - 1)
  for _, id in ipairs(ids) do
    local dk, g = unpack(redis.call('HMGET', task_key(id), 'dk', 'grp'))
    if state == 'ready' then
      lane_remove(id, g or '', now_ms)
    else
      redis.call('ZREM', key, id)
    end
    if dk and dk ~= '' and redis.call('GET', dk) == id then
      redis.call('DEL', dk)
    end
    redis.call('DEL', task_key(id))
    deleted = deleted + 1
  end
  if deleted >= budget then
    break
  end
end
if deleted > 0 then
  redis.call('SPUBLISH', FINISHED, '*')  -- WaitTask callers look again (and find nothing)
end
local more = deleted >= budget
if what == 'purge_with_dead' and not more then
  local left = 0
  for i = 2, 5 do
    left = left + redis.call('ZCARD', KEYS[i])
  end
  if left + redis.call('ZCARD', KEYS[8]) == 0 then
    redis.call('DEL', KEYS[11], KEYS[12], KEYS[16])
  end
end
return {deleted, more and 1 or 0}
