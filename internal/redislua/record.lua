-- Record: make a key's record unless it has one.
--
-- KEYS[1]  the record
-- ARGV[1]  the value
--
-- Returns the record: ARGV[1] when it was absent (now written, without
-- expiry), else the value found. A key of another type is a WRONGTYPE
-- error, and nothing is changed.
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
