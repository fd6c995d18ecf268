-- Extend the leases of many locks in one call: Renew's check and extension
-- for each key, so that the renewals of many holds cost one script call
-- rather than one each.
--
-- KEYS[i]      a lock key
-- ARGV[2i-1]   its owner
-- ARGV[2i]     its new lease in milliseconds, from now
--
-- Replies an array with one element per key, as Renew would reply for it
-- alone: 1 when the lease was extended, 0 when the lock is not the owner's
-- (nothing is changed), or the error GET raised (WRONGTYPE: the key holds
-- something other than a lock), so that one bad key fails only its own
-- renewal.
local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    out[i] = v
  elseif v ~= ARGV[2 * i - 1] then
    out[i] = 0
  else
    redis.call('PEXPIRE', key, ARGV[2 * i])
    out[i] = 1
  end
end
return out
