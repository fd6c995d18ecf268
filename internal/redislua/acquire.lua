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
-- The token is max(counter + 1, server clock in microseconds since the
-- epoch), written back to the counter: see token.lua.
--
-- Running the script twice with the same owner (a client retry after a
-- lost reply) is harmless: the second run finds its own hold and returns
-- the same token.
-- #include token.lua
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Hold metadata: "owner\ndescription", read by inspect.lua only while
  -- that owner holds the lock (so it needs no expiry of its own).
  -- It is written with the counter, in one MSET (token.lua).
  local token
  if KEYS[3] then
    token = nextToken(KEYS[2], redis.call('TIME'), nil, KEYS[3], ARGV[1] .. '\n' .. (ARGV[3] or ''))
  else
    token = nextToken(KEYS[2], redis.call('TIME'), nil)
  end
  if not token then
    redis.call('DEL', KEYS[1])
    return redis.error_reply('NOTALOCK the fencing counter ' .. KEYS[2] .. ' is not an integer')
  end
  return {1, tonumber(token)}
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
  -- Already the owner's (a retry, or a grant): say how long it has left.
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then
    return redis.error_reply('NOTALOCK the lock key ' .. KEYS[1] .. ' holds a value without expiry, not a lock')
  end
  return {1, token, left}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('NOTALOCK the lock key ' .. KEYS[1] .. ' holds a value without expiry, not a lock')
end
return {0, pttl}
