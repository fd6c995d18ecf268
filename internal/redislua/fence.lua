-- Phase 2 of a Redlock token: raise an instance's counter to the token the
-- client chose (the largest of the counters a majority returned), only
-- while the lock on this instance is still ours.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of that lock
-- ARGV[1]  the owner
-- ARGV[2]  the token (decimal)
--
-- Replies 1 when the lock is ours (the counter is now at least the token),
-- else 0. Counters are compared as decimal strings (length, then bytes).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local c = redis.call('GET', KEYS[2])
local t = ARGV[2]
if (not c) or #c < #t or (#c == #t and c < t) then
  redis.call('SET', KEYS[2], t)
end
return 1
