-- Inspect a lock on one Redis instance and, when asked, break it: remove
-- whatever holds it, keeping the fencing counter, and announce the release
-- to waiters.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of that lock
-- KEYS[3]  the hold metadata key (written by acquire.lua)
-- KEYS[4]  the release channel; optional
-- KEYS[5]  optional, with KEYS[4]: the lock's queue (see queue.lua), or
--          a sorted set of waiters (see release.lua)
-- KEYS[6]  with KEYS[5]: the queue's deadlines
-- KEYS[7]  optional, with KEYS[5]: the base of the inbox channels, when not
--          KEYS[4]
-- ARGV[1]  'BREAK' to remove the hold, '' to change nothing
-- ARGV[2]  with BREAK, how to announce: 'PUBLISH', 'SPUBLISH' or ''
-- ARGV[3]  the message to publish
-- (all keys in one hash slot on a Cluster)
--
-- Replies:
--   {0, counter}                         free; counter is the fencing
--                                        counter ('0' when none)
--   {1, pttl, counter, meta, owner}      held by owner for pttl more ms;
--                                        counter (a decimal string) is the
--                                        holder's token; meta its description
--                                        ('' when none was stored)
--   error NOTALOCK                       the lock key holds something else;
--                                        nothing was changed
-- With the queue keys, each reply has one more element: how many live
-- waiters the queue holds (entries whose deadline has not passed); and a
-- break wakes the first of them (the message is its owner) instead of
-- publishing ARGV[3].
local owner = redis.pcall('GET', KEYS[1])
if type(owner) == 'table' then
  return redis.error_reply('NOTALOCK the lock key ' .. KEYS[1] .. ' holds a ' .. redis.call('TYPE', KEYS[1]).ok .. ', not a lock')
end
local counter = redis.pcall('GET', KEYS[2])
if type(counter) ~= 'string' then
  counter = '0'
end
local waiters, first, firstEntry
if KEYS[5] then
  waiters = 0
  local now = redis.call('TIME')
  local nowms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  -- A list, or a sorted set (see release.lua), first in line first.
  local q = redis.pcall('LRANGE', KEYS[5], 0, -1)
  if type(q) == 'table' and q.err then
    q = redis.pcall('ZRANGE', KEYS[5], 0, -1)
  end
  if type(q) == 'table' and not q.err then
    for _, w in ipairs(q) do
      local e = redis.pcall('HGET', KEYS[6], w)
      local d = type(e) == 'string' and tonumber(string.match(e, '^%d+'))
      if d and d > nowms then
        waiters = waiters + 1
        if not first then
          first, firstEntry = w, e
        end
      end
    end
  end
end
if not owner then
  if waiters then
    return {0, counter, waiters}
  end
  return {0, counter}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('NOTALOCK the lock key ' .. KEYS[1] .. ' holds a value without expiry, not a lock')
end
local meta = redis.pcall('GET', KEYS[3])
if type(meta) == 'string' and string.sub(meta, 1, #owner + 1) == owner .. '\n' then
  meta = string.sub(meta, #owner + 2)
else
  meta = ''
end
if ARGV[1] == 'BREAK' then
  redis.call('DEL', KEYS[1], KEYS[3])
  if KEYS[4] and (ARGV[2] == 'PUBLISH' or ARGV[2] == 'SPUBLISH') then
    local inbox = firstEntry and string.match(firstEntry, '^%d+:%d+:([^:]*):') or ''
    redis.call(ARGV[2], inbox ~= '' and ((KEYS[7] or KEYS[4]) .. ':' .. inbox) or KEYS[4], first or ARGV[3] or '')
  end
end
if waiters then
  return {1, pttl, counter, meta, owner, waiters}
end
return {1, pttl, counter, meta, owner}
