package redlock

import "github.com/redis/go-redis/v9"

// The scripts run on each instance. Each is atomic on its instance; the
// quorum logic lives in Go. Release (compare-and-delete, then PUBLISH) and
// renew (compare-and-PEXPIRE) are the single-instance scripts of
// internal/redislua; acquire and fence are Redlock's own: phase 1 returns
// the instance's counter and, when refused, the holder (to tell a clear
// winner from a split vote), and phase 2 raises a counter to the token.
//
// Counters are handled as decimal strings (GET after INCR, comparison by
// length then bytes) so that no value goes through a Lua double.

// acquireScript takes the lock on one instance and bumps its counter.
//
//	KEYS[1] lock, KEYS[2] counter; ARGV[1] owner, ARGV[2] TTL in ms
//	optional KEYS[3] hold metadata, ARGV[3] the holder's description
//	optional KEYS[4] the line, KEYS[5] its entries; ARGV[4] the waiter's
//	member ('' for an attempt that does not wait), ARGV[5] its inbox,
//	ARGV[6] the attempt's ID (letters and digits)
//	optional ARGV[7] a floor for the new counter (decimal µs, or '')
//	optional ARGV[8] with ARGV[4]: the member's score in the line
//
// The line is a sorted set, lowest score first, and the waiter chooses its
// score (see keyWatch.score) and sends the same one to every instance: the
// instances then agree on who is first, and a release (redislua's release
// script in mode HANDOFF, sorted) hands the lock to the same waiter on
// each of them. (An order of arrival differs between instances, and so
// would the first.) A waiter that is refused joins the line, or refreshes
// its entry (deadline:ttl:inbox:attempt:description, the deadline one
// lease after the refresh) and score; one that wins leaves it; one refused because a
// release handed the lock to its own member does not join again there.
// Anyone may take a lock nobody holds, in line or not.
//
// Returns {1, counter} when the lock is ours: newly set (the counter
// becomes max(counter + 1, the server clock in microseconds, the client's
// floor), written back, as the redis backend does) or already ours (a retried request: the
// counter is returned unchanged). Returns {0, PTTL, holder} when another
// owner holds it. A counter that is not an integer is a NOTALOCK error, and
// nothing is changed.
//
// The clock floor keeps an instance's counter above every token it took
// part in when the counter is missing or older than that: a restart
// without persistence, a restart from an older snapshot, a crash that lost
// the last writes of the append-only file. Quorum intersection alone does
// not cover that: the majority of a later acquire may meet the majority
// that wrote the last token only on the instance that went back.
var acquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Hold metadata: "owner\ndescription", read by the inspect script only
  -- while that owner holds the lock here.
  if KEYS[3] then redis.call('SET', KEYS[3], ARGV[1] .. '\n' .. (ARGV[3] or '')) end
  local t = redis.call('TIME')
  local clock = t[1] .. string.format('%06d', tonumber(t[2]))
  -- The client's floor, a little ahead of its clock: when it is above
  -- every instance's clock, the instances that grant return the same
  -- counter, and phase 2 is not needed.
  local floor = ARGV[7]
  if floor and floor ~= '' and (#clock < #floor or (#clock == #floor and clock < floor)) then
    clock = floor
  end
  local c = redis.pcall('GET', KEYS[2])
  if type(c) == 'table' or (c and not string.match(c, '^-?%d+$')) then
    redis.call('DEL', KEYS[1])
    return redis.error_reply('NOTALOCK the fencing counter ' .. KEYS[2] .. ' is not an integer')
  end
  if (not c) or #c < #clock or (#c == #clock and c < clock) then
    redis.call('SET', KEYS[2], clock)
    c = clock
  else
    -- Only when the counter is ahead of every clock: INCR keeps it exact
    -- (no Lua double), and GET reads it back as a string.
    redis.call('INCR', KEYS[2])
    c = redis.call('GET', KEYS[2])
  end
  -- A waiter that wins leaves the wake queue.
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
  -- Entries as redislua's release script hands over from them:
  -- deadline:ttl:inbox:attempt:meta, the deadline one lease after this
  -- refresh (a release that grants the lock tells the waiter how long
  -- after this attempt's refresh it did).
  redis.call('HSET', KEYS[5], ARGV[4], (nowms + life) .. ':' .. ARGV[2] .. ':' .. ARGV[5] .. ':' .. ARGV[6] .. ':' .. (ARGV[3] or ''))
  redis.call('ZADD', KEYS[4], ARGV[8], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], life)
  redis.call('PEXPIRE', KEYS[5], life)
end
return {0, redis.call('PTTL', KEYS[1]), holder}
`)

// fenceScript is phase 2 of the token: raise the counter to the token
// chosen by the client, only while the lock on this instance is still ours.
//
//	KEYS[1] lock, KEYS[2] counter; ARGV[1] owner, ARGV[2] token
//
// Returns 1 when the lock is ours (the counter is now >= token), else 0.
var fenceScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local c = redis.call('GET', KEYS[2])
local t = ARGV[2]
if (not c) or #c < #t or (#c == #t and c < t) then
  redis.call('SET', KEYS[2], t)
end
return 1
`)
