-- queue_remove.lua: delete tasks that no worker holds.
-- KEYS: see queue_common.lua
-- ARGV[4] what: cancel | purge | purge_with_dead   ARGV[5] task id (cancel) or batch size (purge)
-- Returns for cancel CANCEL.CANCELLED (deleted), CANCEL.NO_SUCH_TASK or CANCEL.LEASED (not deleted);
-- for purge {deleted, 1 if more remain (call again) else 0}.
--! include status.lua
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
announce(sweep(now_ms))
local what = ARGV[4]
local from = {ready = {KEYS[1], KEYS[2]}, delayed = {KEYS[3]}, dead = {KEYS[5]}}
if what == 'cancel' then
  local id = ARGV[5]
  local state = redis.call('HGET', task_key(id), 'state')
  if not state then
    return CANCEL.NO_SUCH_TASK
  elseif state == 'leased' then
    return CANCEL.LEASED
  end
  for _, key in ipairs(from[state]) do
    redis.call('ZREM', key, id)
  end
  finish(id)
  return CANCEL.CANCELLED
end
local budget = tonumber(ARGV[5])
local deleted = 0
local states = {'ready', 'delayed'}
if what == 'purge_with_dead' then
  states[3] = 'dead'
end
for _, state in ipairs(states) do
  local keys = from[state]
  local ids = redis.call('ZRANGE', keys[1], 0, budget - deleted - 1)
  for _, id in ipairs(ids) do
    for _, key in ipairs(keys) do
      redis.call('ZREM', key, id)
    end
    finish(id)
    deleted = deleted + 1
  end
  if deleted >= budget then
    return {deleted, 1}
  end
end
return {deleted, 0}
