-- The fencing token rule, included in the scripts that make a token
-- (a line "-- #include token.lua" is replaced by this file when the
-- scripts are loaded: Lua in Redis has no include).
--
-- nextToken(counter, now, floor, ...) makes a lock's next token and writes
-- it back to the counter key: max(counter + 1, the server clock in
-- microseconds since the epoch, floor), now being the reply of TIME and
-- floor a decimal string, '' or nil. Further arguments are key, value
-- pairs written with the counter (the hold's description), in the same
-- MSET when the clock makes the token (the usual case: one write for
-- both). It returns the token as a decimal string, or nil, changing
-- nothing, when the counter holds something other than an integer.
--
-- The clock matters whenever the counter is missing or older than what
-- was issued: a restart without persistence, a restart from an older
-- snapshot, a crash that lost the last writes of the append-only file, a
-- failover to a replica that missed the last increments. Every token
-- issued before was at most the counter the server had then, which was at
-- most max(an earlier counter, the clock at that moment), so the next
-- token is greater than all of them as long as the server clock has not
-- stepped back by more than the time since the last acquisition (and one
-- key is not acquired more than a million times a second, which would run
-- the counter ahead of the clock). The floor lets a client that sends every
-- server of a Redlock the same one, above their clocks, have them make the
-- same token.
--
-- Counters are handled as decimal strings (compared by length, then bytes;
-- the clock built as a string, since Lua would print a large number in
-- exponent form; INCR then GET when the counter is ahead), so that no value
-- goes through a Lua double.
local function nextToken(counter, now, floor, ...)
  local clock = now[1] .. string.format('%06d', tonumber(now[2]))
  if floor and floor ~= '' and string.match(floor, '^%d+$') and (#clock < #floor or (#clock == #floor and clock < floor)) then
    clock = floor
  end
  local c = redis.pcall('GET', counter)
  if c and (type(c) ~= 'string' or not string.match(c, '^-?%d+$')) then
    return nil
  end
  if not c or #c < #clock or (#c == #clock and c < clock) then
    redis.call('MSET', counter, clock, ...)
    return clock
  end
  redis.call('INCR', counter)
  if select('#', ...) > 0 then
    redis.call('MSET', ...)
  end
  return redis.call('GET', counter)
end
