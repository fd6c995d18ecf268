-- Release a lock if, and only if, it is still held by the given owner, and
-- announce the release to waiters.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release channel (same hash slot on a Cluster); optional
-- ARGV[1]  the owner
-- ARGV[2]  how to announce: 'PUBLISH', 'SPUBLISH' (sharded pub/sub), or ''
--          for no announcement
-- ARGV[3]  the message to publish
--
-- Replies 1 when the lock was released, 0 when it was not the owner's (it
-- expired, or it is someone else's now): then nothing is changed. A lock key
-- holding another type is a WRONGTYPE error, and nothing is changed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if KEYS[2] and (ARGV[2] == 'PUBLISH' or ARGV[2] == 'SPUBLISH') then
  redis.call(ARGV[2], KEYS[2], ARGV[3] or '')
end
return 1
