-- recent_add.lua: move a contact to the front of a user's recent contacts.
-- KEYS[1] the user's recent contacts (list, most recent first)
-- ARGV[1] contact   ARGV[2] most contacts kept
-- Returns how many contacts the user has now.
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
return redis.call('LLEN', KEYS[1])
