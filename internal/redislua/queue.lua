-- Acquire a lock on one Redis instance in the order waiters queued for it,
-- with a fencing token; or, when the lock is taken, join its queue.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of that lock
-- KEYS[3]  the hold metadata key
-- KEYS[4]  the queue: a list of waiting owners, first in line first
-- KEYS[5]  the queue's entries: a hash, owner ->
--          "deadline:ttl:inbox:attempt:meta", deadline the server time in
--          ms after which the entry is dropped unless its waiter refreshed
--          it, ttl and meta the waiter's lease and description (for
--          release.lua to grant it the lock), inbox the suffix of the
--          waiter's own channel, attempt the attempt that made the last
--          refresh (a grant names it: see release.lua)
-- KEYS[6]  the release channel; a waiter is woken on KEYS[6]:inbox (the
--          same hash slot), so that no other waiter hears of it
-- (all keys in one hash slot on a Cluster)
-- ARGV[1]  the owner: a value unique to this hold (and to this wait)
-- ARGV[2]  the lease in milliseconds (a positive integer); also how long
--          a queue entry lives without a refresh
-- ARGV[3]  the holder's description (dlock.WithOwner)
-- ARGV[4]  'QUEUE' to join (or stay in) the queue when the lock is not
--          granted; 'TRY' to change nothing then
-- ARGV[5]  how to wake a waiter: 'PUBLISH', 'SPUBLISH' or ''
-- ARGV[6]  the inbox of this waiter: letters and digits, no ':' (one per
--          Locker: a Locker has at most one waiter per key)
-- ARGV[7]  optional: this attempt's ID, letters and digits, no ':'
--
-- Replies:
--   {1, token}      acquired; token is strictly greater than every token
--                   issued before for this counter
--   {1, token, left} the owner held the lock already (a release granted it,
--                   or this is a retry of an attempt that took it): its
--                   token, and the ms its lease has left
--   {0, wait}       not acquired: held by another owner, or free but
--                   promised to an earlier waiter; wait is how many ms
--                   until that changes by itself (the holder's lease, or
--                   the first waiter's deadline), for the caller's timer
--   error NOTALOCK  a key holds something that is not ours; nothing was
--                   changed
--
-- The lock is granted only when it is free and nobody live waits before
-- this owner: the first live entry of the queue, or an empty queue. Entries
-- whose deadline has passed (a waiter that died, or was cut off) are
-- dropped from the head first, so a dead waiter holds the line for at most
-- one lease. A release wakes only the first waiter (release.lua), and so
-- does this script when it dropped a dead head in front of a live one.
--
-- The token is max(counter + 1, server clock in microseconds since the
-- epoch), written back to the counter: see token.lua for why the clock
-- floor keeps tokens increasing across restarts, rollbacks and failovers.
-- Running the script twice with
-- the same owner (a client retry after a lost reply) is harmless: the second
-- run finds its own hold and returns the same token.
-- #include token.lua
local function notalock(key, what)
  return redis.error_reply('NOTALOCK the key ' .. key .. ' holds a ' .. redis.call('TYPE', key).ok .. ', not ' .. what)
end
local owner = ARGV[1]
local meta = owner .. '\n' .. (ARGV[3] or '')
-- The uncontended case first, in as few commands as it can be: with
-- nobody queued, a free lock is this owner's at once (SET NX), its token
-- and description written together (token.lua). Anything else (a queue,
-- a held lock, a key that is not ours) goes the long way below.
local head = redis.pcall('LINDEX', KEYS[4], 0)
if not head and redis.call('SET', KEYS[1], owner, 'NX', 'PX', ARGV[2]) then
  -- Hold metadata: "owner\ndescription", read by inspect.lua only while
  -- that owner holds the lock (so it needs no expiry of its own).
  local token = nextToken(KEYS[2], redis.call('TIME'), nil, KEYS[3], meta)
  if not token then
    redis.call('DEL', KEYS[1]) -- it was free: nothing changed
    return redis.error_reply('NOTALOCK the fencing counter ' .. KEYS[2] .. ' is not an integer')
  end
  return {1, tonumber(token)}
end
local value = redis.pcall('GET', KEYS[1])
if type(value) == 'table' then
  return notalock(KEYS[1], 'a lock')
end
if value == owner then
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
local now = redis.call('TIME')
local nowms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
-- Drop dead entries from the head of the queue (read above).
if type(head) == 'table' then
  return notalock(KEYS[4], 'a lock queue')
end
local headDeadline, headEntry
local pruned = false
while head do
  local e = redis.pcall('HGET', KEYS[5], head)
  if type(e) == 'table' then
    return notalock(KEYS[5], 'a lock queue')
  end
  local d = e and tonumber(string.match(e, '^%d+'))
  if d and d > nowms then
    headDeadline, headEntry = d, e
    break
  end
  redis.call('LPOP', KEYS[4])
  redis.call('HDEL', KEYS[5], head)
  pruned = true
  head = redis.call('LINDEX', KEYS[4], 0)
end
if not value and (not head or head == owner) then
  local token = nextToken(KEYS[2], now, nil, KEYS[3], meta)
  if not token then
    return redis.error_reply('NOTALOCK the fencing counter ' .. KEYS[2] .. ' is not an integer')
  end
  redis.call('SET', KEYS[1], owner, 'PX', ARGV[2])
  if head then
    redis.call('LPOP', KEYS[4])
    redis.call('HDEL', KEYS[5], owner)
  end
  return {1, tonumber(token)}
end
local pttl = 0
if value then
  pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 then
    return redis.error_reply('NOTALOCK the lock key ' .. KEYS[1] .. ' holds a value without expiry, not a lock')
  end
end
if ARGV[4] == 'QUEUE' then
  local ttl = tonumber(ARGV[2])
  if redis.call('HSET', KEYS[5], owner, (nowms + ttl) .. ':' .. ttl .. ':' .. (ARGV[6] or '') .. ':' .. (ARGV[7] or '') .. ':' .. (ARGV[3] or '')) == 1 then
    redis.call('RPUSH', KEYS[4], owner)
    if not head then
      head = owner
    end
  end
  -- The queue outlives its last refreshed entry by one lease.
  redis.call('PEXPIRE', KEYS[4], ttl)
  redis.call('PEXPIRE', KEYS[5], ttl)
end
if pruned and not value and head and head ~= owner and (ARGV[5] == 'PUBLISH' or ARGV[5] == 'SPUBLISH') then
  -- A dead waiter stood first: wake the live one behind it.
  local inbox = headEntry and string.match(headEntry, '^%d+:%d+:([^:]*):') or ''
  redis.call(ARGV[5], inbox ~= '' and (KEYS[6] .. ':' .. inbox) or KEYS[6], head)
end
local wait = pttl
if head and head ~= owner and headDeadline and (not value or ARGV[4] == 'QUEUE') then
  -- Behind another waiter: nothing changes for this one before the first
  -- waiter's entry would run out (a release wakes it by message).
  wait = headDeadline - nowms
end
return {0, math.max(wait, 1)}
