-- Extend a lock's lease if, and only if, it is still held by the given owner.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner
-- ARGV[2]  the new lease in milliseconds, from now
--
-- Replies 1 when the lease was extended, 0 when the lock is not the owner's
-- (it expired, or it is someone else's now): then nothing is changed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
