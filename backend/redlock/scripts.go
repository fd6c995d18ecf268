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
//
// Returns {1, counter} when the lock is ours: newly set (the counter
// becomes max(counter + 1, the server clock in microseconds), written back,
// as the redis backend does) or already ours (a retried request: the
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
  if redis.call('EXISTS', KEYS[2]) == 1 then
    local n = redis.pcall('INCR', KEYS[2])
    if type(n) == 'table' then
      redis.call('DEL', KEYS[1])
      return redis.error_reply('NOTALOCK the fencing counter ' .. KEYS[2] .. ' is not an integer: ' .. tostring(n.err))
    end
  end
  local t = redis.call('TIME')
  local clock = t[1] .. string.format('%06d', tonumber(t[2]))
  local c = redis.call('GET', KEYS[2])
  if (not c) or #c < #clock or (#c == #clock and c < clock) then
    redis.call('SET', KEYS[2], clock)
    c = clock
  end
  return {1, c}
end
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return {1, redis.call('GET', KEYS[2]) or '0'}
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
