-- Extend the leases of many locks in one call: Renew's check and extension
-- for each key, so that the renewals of many holds cost one script call
-- rather than one each.
--
-- KEYS[i]      a lock key
-- ARGV[1]      the new lease of every key, in milliseconds from now
-- ARGV[i + 1]  the owner of KEYS[i]
--
-- Replies the keys it did not extend, as a flat array of pairs: the key's
-- index (from 1) and what Renew would reply for it alone, 0 when the lock
-- is not the owner's (nothing is changed), or the error GET raised
-- (WRONGTYPE: the key holds something other than a lock), so that one bad
-- key fails only its own renewal. An empty array: every key was extended.
-- Nearly every renewal succeeds, so the reply is nearly always empty, and
-- one lease for all spares an argument per key.
local out = {}
local ttl = ARGV[1]
for i = 1, #KEYS do
  local key = KEYS[i]
  local v = redis.pcall('GET', key)
  if v == ARGV[i + 1] then
    redis.call('PEXPIRE', key, ttl)
  else
    out[#out + 1] = i
    if type(v) == 'table' and v.err then
      out[#out + 1] = v
    else
      out[#out + 1] = 0
    end
  end
end
return out
