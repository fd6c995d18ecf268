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
-- The values are read with one MGET per up to 1,000 keys (a GET per key
-- cost the server a call per hold more), and the key of a value that is
-- not the owner's is read again with GET only when MGET saw none, to tell
-- a missing key from one that is not a string.
local out = {}
local ttl = ARGV[1]
local n = #KEYS
for from = 1, n, 1000 do
  local to = math.min(from + 999, n)
  local vals = redis.call('MGET', unpack(KEYS, from, to))
  for i = from, to do
    local key = KEYS[i]
    local v = vals[i - from + 1]
    if v == ARGV[i + 1] then
      redis.call('PEXPIRE', key, ttl)
    else
      out[#out + 1] = i
      local e = 0
      if not v then
        local g = redis.pcall('GET', key)
        if type(g) == 'table' and g.err then
          e = g
        end
      end
      out[#out + 1] = e
    end
  end
end
return out
