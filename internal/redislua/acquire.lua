-- Acquire a lock on one Redis instance, with a fencing token.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of that lock (same hash slot on a Cluster)
-- ARGV[1]  the owner: a value unique to this hold
-- ARGV[2]  the lease in milliseconds (a positive integer)
-- KEYS[3]  optional: the hold metadata key (same hash slot on a Cluster)
-- ARGV[3]  with KEYS[3]: the holder's description (dlock.WithOwner)
--
-- Replies:
--   {1, token}      acquired; token is strictly greater than every token
--                   issued before for this counter
--   {0, pttl}       held by another owner for pttl more milliseconds
--   error NOTALOCK  the lock key or the counter holds something that is
--                   not ours (a hash, a string without expiry, a counter
--                   that is not an integer); nothing was changed
--
-- A missing counter is seeded from the server clock (microseconds since the
-- epoch), so that a restart that lost the counter never makes tokens go
-- back, as long as one key is not acquired more than a million times a
-- second and the server clock does not step back.
--
-- Running the script twice with the same owner (a client retry after a
-- lost reply) is harmless: the second run finds its own hold and returns
-- the same token.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Hold metadata: "owner\ndescription", read by inspect.lua only while
  -- that owner holds the lock (so it needs no expiry of its own).
  if KEYS[3] then redis.call('SET', KEYS[3], ARGV[1] .. '\n' .. (ARGV[3] or '')) end
  local token = redis.pcall('INCR', KEYS[2])
  if type(token) == 'table' then
    redis.call('DEL', KEYS[1])
    return redis.error_reply('NOTALOCK the fencing counter ' .. KEYS[2] .. ' is not an integer: ' .. tostring(token.err))
  end
  if token == 1 then
    -- The counter did not exist (tokens never start at 0): seed it from
    -- the clock. Built as a string: Lua would print a large number in
    -- exponent form.
    local now = redis.call('TIME')
    local seed = now[1] .. string.format('%06d', tonumber(now[2]))
    redis.call('SET', KEYS[2], seed)
    token = tonumber(seed)
  end
  return {1, token}
end
local value = redis.pcall('GET', KEYS[1])
if type(value) == 'table' then
  return redis.error_reply('NOTALOCK the lock key ' .. KEYS[1] .. ' holds a ' .. redis.call('TYPE', KEYS[1]).ok .. ', not a lock')
end
if value == ARGV[1] then
  local token = tonumber(redis.call('GET', KEYS[2]))
  if token == nil then
    return redis.error_reply('NOTALOCK the fencing counter ' .. KEYS[2] .. ' vanished while its lock was held')
  end
  return {1, token}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('NOTALOCK the lock key ' .. KEYS[1] .. ' holds a value without expiry, not a lock')
end
return {0, pttl}
