-- Fenced access to one value stored in Redis, atomically (one script call).
--
-- KEYS[1]  the resource's hash: field "fence" holds the highest token seen,
--          field "value" the value.
-- ARGV[1]  the operation: "get", "set" or "del".
-- ARGV[2]  the token, as 20 zero-padded decimal digits.
-- ARGV[3]  the value, for "set".
--
-- The rule: the operation is accepted iff token >= the stored fence, and
-- then the fence is raised to token. Reads raise it too.
--
-- Returns {0, fence} when the token is refused (fence is the stored one),
-- {1} when accepted (with the value as the second element for a "get" that
-- found one), {2} for a "get" that found no value.
--
-- Tokens are compared as two 10-digit halves: Lua numbers are doubles and
-- lose precision above 2^53, and comparing the strings with "<" would depend
-- on the server's collation locale.

local function older(a, b) -- a < b, for two 20-digit decimal strings
  local ah, bh = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  if ah ~= bh then return ah < bh end
  return tonumber(string.sub(a, 11, 20)) < tonumber(string.sub(b, 11, 20))
end

local function token(s)
  return type(s) == 'string' and string.len(s) == 20 and string.find(s, '^%d+$') ~= nil
end

local op, tok = ARGV[1], ARGV[2]
if op ~= 'get' and op ~= 'set' and op ~= 'del' then
  return redis.error_reply('fence: unknown operation ' .. tostring(op))
end
if not token(tok) then
  return redis.error_reply('fence: malformed token ' .. tostring(tok))
end
local cur = redis.call('HGET', KEYS[1], 'fence')
if cur then
  if not token(cur) then
    return redis.error_reply('fence: stored fence is malformed: ' .. tostring(cur))
  end
  if older(tok, cur) then
    return {0, cur}
  end
end
redis.call('HSET', KEYS[1], 'fence', tok)

if op == 'get' then
  local v = redis.call('HGET', KEYS[1], 'value')
  if v then return {1, v} end
  return {2}
elseif op == 'set' then
  redis.call('HSET', KEYS[1], 'value', ARGV[3])
  return {1}
end
redis.call('HDEL', KEYS[1], 'value') -- "del"
return {1}
