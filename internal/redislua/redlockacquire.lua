-- Phase 1 of a Redlock acquire on one of its instances: take the lock and
-- bump its counter. Each script is atomic on its instance; the quorum logic
-- lives in the redlock backend, which runs this on every instance.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of that lock
-- KEYS[3]  optional: the hold metadata key
-- KEYS[4]  optional, with KEYS[3]: the line, a sorted set of waiting
--          members, lowest score first
-- KEYS[5]  with KEYS[4]: the line's entries, a hash, member ->
--          "deadline:ttl:inbox:attempt:meta" (as release.lua hands over
--          from them)
-- ARGV[1]  the owner: a value unique to this hold
-- ARGV[2]  the lease in milliseconds (a positive integer)
-- ARGV[3]  with KEYS[3]: the holder's description
-- ARGV[4]  with KEYS[4]: the waiter's member ('' for an attempt that does
--          not wait)
-- ARGV[5]  with ARGV[4]: the waiter's inbox
-- ARGV[6]  with ARGV[4]: the attempt's ID (letters and digits)
-- ARGV[7]  optional: a floor for the new counter (decimal µs, or '')
-- ARGV[8]  with ARGV[4]: the member's score in the line
--
-- The line is a sorted set, lowest score first, and the waiter chooses its
-- score and sends the same one to every instance: the instances then agree
-- on who is first, and a release (release.lua in mode HANDOFF, SORTED)
-- hands the lock to the same waiter on each of them. (An order of arrival
-- differs between instances, and so would the first.) A waiter that is
-- refused joins the line, or refreshes its entry (the deadline one lease
-- after the refresh) and score; one that wins leaves it; one refused
-- because a release handed the lock to its own member does not join again
-- there. Anyone may take a lock nobody holds, in line or not.
--
-- Replies:
--   {1, counter}          the lock is ours: newly set (the counter becomes
--                         the next token, token.lua, at least the floor,
--                         as the redis backend makes it) or already ours
--                         (a retried request: the counter unchanged)
--   {0, pttl, holder}     another owner holds it
--   error NOTALOCK        the counter is not an integer; nothing was
--                         changed
--
-- The clock keeps an instance's counter above every token it took part in
-- when the counter is missing or older than that: a restart without
-- persistence, a restart from an older snapshot, a crash that lost the
-- last writes of the append-only file. Quorum intersection alone does not
-- cover that: the majority of a later acquire may meet the majority that
-- wrote the last token only on the instance that went back. The client's
-- floor, a little ahead of its clock, is there so that when it is above
-- every instance's clock the instances that grant return the same counter,
-- and phase 2 (fence.lua) is not needed.
-- #include token.lua
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Hold metadata: "owner\ndescription", read by inspect.lua only while
  -- that owner holds the lock here.
  -- It is written with the counter, in one MSET (token.lua).
  local c
  if KEYS[3] then
    c = nextToken(KEYS[2], redis.call('TIME'), ARGV[7], KEYS[3], ARGV[1] .. '\n' .. (ARGV[3] or ''))
  else
    c = nextToken(KEYS[2], redis.call('TIME'), ARGV[7])
  end
  if not c then
    redis.call('DEL', KEYS[1])
    return redis.error_reply('NOTALOCK the fencing counter ' .. KEYS[2] .. ' is not an integer')
  end
  -- A waiter that wins leaves the line.
  if ARGV[4] and ARGV[4] ~= '' and redis.call('HDEL', KEYS[5], ARGV[4]) == 1 then
    redis.call('ZREM', KEYS[4], ARGV[4])
  end
  return {1, c}
end
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return {1, redis.call('GET', KEYS[2]) or '0'}
end
if ARGV[4] and ARGV[4] ~= '' and holder ~= ARGV[4] then
  local t = redis.call('TIME')
  local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local life = tonumber(ARGV[2])
  -- The deadline is one lease after this refresh (a release that grants
  -- the lock tells the waiter how long after this attempt's refresh it
  -- did).
  redis.call('HSET', KEYS[5], ARGV[4], (nowms + life) .. ':' .. ARGV[2] .. ':' .. ARGV[5] .. ':' .. ARGV[6] .. ':' .. (ARGV[3] or ''))
  redis.call('ZADD', KEYS[4], ARGV[8], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], life)
  redis.call('PEXPIRE', KEYS[5], life)
end
return {0, redis.call('PTTL', KEYS[1]), holder}
