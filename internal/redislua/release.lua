-- Release a lock if, and only if, it is still held by the given owner, and
-- announce the release to waiters; with a queue, also leave the queue.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release channel (same hash slot on a Cluster); optional
-- KEYS[3]  optional, with KEYS[2]: the lock's queue (see queue.lua)
-- KEYS[4]  with KEYS[3]: the queue's entries
-- KEYS[5]  with KEYS[3]: the fencing counter
-- KEYS[6]  with KEYS[3]: the hold metadata key
-- KEYS[7]  optional, with KEYS[3]: the base of the inbox channels, when
--          not KEYS[2] (a waiter is woken on KEYS[7] .. ':' .. its inbox)
-- ARGV[1]  the owner
-- ARGV[2]  how to announce: 'PUBLISH', 'SPUBLISH' (sharded pub/sub), or ''
--          for no announcement
-- ARGV[3]  the message to publish when nobody is queued
-- ARGV[4]  with the queue keys: 'GRANT' to hand the lock to the first live
--          waiter, '' to only wake it, 'HANDOFF' to grant as GRANT does
--          but only to a waiter that hears of it (for waiters whose inbox
--          subscriptions are on this server): while nobody is subscribed
--          to the first waiter's inbox (PUBLISH counts no receiver: its
--          process is gone), the grant is undone (the lock is freed again;
--          the token stays spent) and the next live waiter is tried; and
--          only with an announcement (no grant nobody is told of). A
--          waiter HANDOFF cannot grant to (a counter that is not an
--          integer) is only woken, with "member releaser", the releaser
--          being ARGV[1]
-- ARGV[5]  optional, with the queue keys: 'SORTED' when the queue is a
--          sorted set, first in line the lowest score (its waiters choose
--          their scores, so that every server of a Redlock orders them
--          alike), instead of a list; '' for a list
-- ARGV[6]  optional, with GRANT or HANDOFF: a floor for a granted token
--          (decimal, or ''), which the token is raised to when it is below:
--          a releaser that sends every server of a Redlock the same floor,
--          above their clocks, has them grant the same token
-- ARGV[7]  optional, with GRANT or '': 'HEARD' to grant to (or wake) only a
--          waiter that hears of it, as HANDOFF does, for waiters whose
--          inbox subscriptions are on this server: a waiter with an inbox
--          that nobody is subscribed to (PUBLISH or SPUBLISH counts no
--          receiver: its process is gone, or its connection is being
--          remade) is dropped from the queue, a grant to it undone (the
--          token stays spent), and the next live waiter is tried, so the
--          lock goes to a waiter that hears or is left free. Messages are
--          GRANT's (the owner alone for a wake). Only with an announcement
--          (ARGV[2]); an entry without an inbox is not asked
--
-- Replies 1 when the lock was released, 0 when it was not the owner's (it
-- expired, or it is someone else's now): then the lock is not changed. A
-- lock key holding another type is a WRONGTYPE error, and nothing is
-- changed.
--
-- With the queue keys, the owner's queue entry (a waiter that gives up, or
-- an acquire whose reply was lost) is removed too, and when the lock is
-- free afterwards and this changed who may take it, only the first live
-- waiter hears of it. With GRANT, the lock is that waiter's at once: set
-- to its owner with its description and a fencing token as queue.lua
-- makes one, for one whole lease from now; the entry is removed, and the
-- message is "owner:token:elapsed:attempt", published on the waiter's own
-- channel (KEYS[2]:inbox, see queue.lua). elapsed is how many ms of this
-- server's clock passed between the waiter's last refresh of its entry and
-- the grant, and attempt names the waiter's attempt that made that
-- refresh (entries are "deadline:ttl:inbox:attempt:meta"): the waiter
-- counts its validity window from the sending of that attempt plus
-- elapsed, so that it ends before the lease set here does, and not up to
-- a refresh interval earlier than it must; a grant naming another attempt
-- it does not count from at all. Without GRANT (or with a counter that is
-- not an integer, or an entry that names no attempt) the message is the
-- owner, and the waiter takes the lock with queue.lua. With nobody queued, ARGV[3] is published,
-- for waiters that do not queue.
-- #include token.lua
local value = redis.call('GET', KEYS[1])
local released = value == ARGV[1]
local announce = KEYS[2] and (ARGV[2] == 'PUBLISH' or ARGV[2] == 'SPUBLISH')
if not KEYS[3] then
  if released then
    redis.call('DEL', KEYS[1])
    if announce then
      redis.call(ARGV[2], KEYS[2], ARGV[3] or '')
    end
  end
  return released and 1 or 0
end
-- The queue's first member (nil when empty), removal of the first, and
-- removal of any one member, for either kind of queue.
local sorted = ARGV[5] == 'SORTED'
local function first()
  if sorted then
    return redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  end
  return redis.call('LINDEX', KEYS[3], 0)
end
local function pop()
  if sorted then
    redis.call('ZPOPMIN', KEYS[3])
  else
    redis.call('LPOP', KEYS[3])
  end
end
local function remove(member)
  if sorted then
    redis.call('ZREM', KEYS[3], member)
  else
    redis.call('LREM', KEYS[3], 0, member)
  end
end
-- A holder is never queued (its entry went when it took the lock): only
-- an owner that does not hold the lock can have an entry to remove.
local wasFirst = false
if not released and redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then
  wasFirst = first() == ARGV[1]
  remove(ARGV[1])
end
if not (released or (wasFirst and not value)) then
  return 0
end
-- The lock is free: wake the first live waiter, dropping dead ones.
local head = first()
local now, nowms, entry
if head then
  now = redis.call('TIME')
  nowms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
-- live drops the waiters whose entries ran out from the head of the queue
-- and returns the first live one and its entry (nil when none is left).
local function live(h)
  while h do
    local e = redis.call('HGET', KEYS[4], h)
    local d = e and tonumber(string.match(e, '^%d+'))
    if d and d > nowms then
      return h, e
    end
    pop()
    redis.call('HDEL', KEYS[4], h)
    h = first()
  end
  return nil, nil
end
head, entry = live(head)
local message = head or ARGV[3] or ''
if head and ARGV[4] == 'HANDOFF' then
  -- Also who released, so that a waiter woken by several servers for one
  -- release counts it once.
  message = head .. ' ' .. ARGV[1]
end
local handoff = ARGV[4] == 'HANDOFF'
local granting = ARGV[4] == 'GRANT' or (handoff and announce)
-- heard: only a waiter that hears of it is granted the lock or woken.
local heard = handoff or ARGV[7] == 'HEARD'
-- grant hands the lock to waiter h with entry e: set to h with its
-- description and a fencing token as queue.lua makes one, for one whole
-- lease from now; h leaves the queue. Returns the message to send h, or nil
-- (the lock is not changed) when the entry or the counter is not as ours.
local function grant(h, e)
  -- The entry names the attempt that made its last refresh, and so does
  -- the grant: the waiter counts elapsed from that attempt's sending, and
  -- from no other (a grant it hears late, after attempting again, must not
  -- count from the later attempt).
  local d, ttl, attempt, meta = string.match(e, '^(%d+):(%d+):[^:]*:([^:]*):(.*)$')
  if not (d and tonumber(ttl) > 0) then
    return nil
  end
  -- The token, as queue.lua makes it (token.lua), at least the floor.
  -- The description is written with the counter (token.lua).
  local token = nextToken(KEYS[5], now, ARGV[6], KEYS[6], h .. '\n' .. meta)
  if not token then
    return nil
  end
  redis.call('SET', KEYS[1], h, 'PX', tonumber(ttl))
  pop()
  redis.call('HDEL', KEYS[4], h)
  -- The entry's deadline is its last refresh plus its lease.
  local elapsed = math.max(nowms - (tonumber(d) - tonumber(ttl)), 0)
  return h .. ':' .. token .. ':' .. elapsed .. ':' .. attempt
end
local granted = false
-- handOver grants the lock to head, when it can be granted.
local function handOver()
  local m = grant(head, entry)
  if m then
    message, granted = m, true
  end
end
if head and granting then
  handOver()
end
if released and not granted then
  redis.call('DEL', KEYS[1])
end
if announce then
  while true do
    -- To the first waiter's own channel only (see queue.lua).
    local inbox = entry and string.match(entry, '^%d+:%d+:([^:]*):') or ''
    local receivers = redis.call(ARGV[2], (head and inbox ~= '') and ((KEYS[7] or KEYS[2]) .. ':' .. inbox) or KEYS[2], message)
    if not (heard and head and inbox ~= '' and receivers == 0) then
      break
    end
    -- HANDOFF or HEARD: nobody listens on that waiter's inbox, so its
    -- process is gone. Drop it (a grant to it is undone) and try the next
    -- live one.
    if granted then
      redis.call('DEL', KEYS[1])
      granted = false
    else
      pop()
      redis.call('HDEL', KEYS[4], head)
    end
    head, entry = live(first())
    message = head or ARGV[3] or ''
    if head and handoff then
      message = head .. ' ' .. ARGV[1]
    end
    if head and granting then
      handOver()
    end
  end
end
return released and 1 or 0
