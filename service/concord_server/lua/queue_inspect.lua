-- queue_inspect.lua: counts, or a page of tasks in one state, after the clock's changes.
-- KEYS: see queue_common.lua
-- ARGV[7] what: stats | ready | delayed | leased | dead | task | policy
-- ARGV[8] offset (or task id)   ARGV[9] limit   ARGV[10] a page's reply bytes: the page ends
--         before the task that would pass them (task_bytes; the first task always comes)
-- Returns for stats {ready, delayed, leased, dead, age of the oldest ready task ms (-1: none),
--   paused 0/1, succeeded and cancelled tasks retained};
-- for task: {now_ms, paused 0/1, the task (see task_detail)}, or 0 when there is no such task;
-- for policy: as queue_policy.lua;
-- otherwise {task 1 (see task_reply), task 2, ...} in that state's order.
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
announce(sweep(now_ms))
local what = ARGV[7]
if what == 'stats' then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  local age = oldest[2] and math.max(0, now_ms - tonumber(oldest[2])) or -1
  return {redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[4]),
    redis.call('ZCARD', KEYS[5]), age, paused() and 1 or 0, redis.call('ZCARD', KEYS[8])}
elseif what == 'task' then
  if redis.call('EXISTS', task_key(ARGV[8])) == 0 then
    return 0
  end
  return {now_ms, paused() and 1 or 0, task_detail(ARGV[8], now_ms)}
elseif what == 'policy' then
  return policy_reply()
end
-- Ready tasks in Dequeue order while the queue has no groups; by how long they have
-- waited once it has (turns between groups have no one order to list).
local ready = KEYS[1]
if redis.call('ZCARD', KEYS[15]) > 0 then
  ready = KEYS[2]
end
local key = ({ready = ready, delayed = KEYS[3], leased = KEYS[4], dead = KEYS[5]})[what]
local offset = tonumber(ARGV[8])
local reply, budget, used = {}, tonumber(ARGV[10]), 0
for _, id in ipairs(redis.call('ZRANGE', key, offset, offset + tonumber(ARGV[9]) - 1)) do
  used = used + task_bytes(id)
  if used > budget and #reply > 0 then
    break
  end
  reply[#reply + 1] = task_reply(id)
end
return reply
