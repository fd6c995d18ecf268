-- ClearRecord: delete a key's record if it holds the given value.
--
-- KEYS[1]  the record
-- ARGV[1]  the value
--
-- Returns 1 when the record was ARGV[1] and is now deleted, else 0 (no
-- record, or another value, left alone). A key of another type is a
-- WRONGTYPE error.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
