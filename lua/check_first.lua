-- check_first: limits tried in order; the FIRST that admits is debited and
-- decides, the others are not written. A login attempt with a device cookie:
-- the device's own backoff, else (the device revoked) the account's, in one
-- round trip instead of two.
-- fragments: <strategies>
--
-- KEYS, ARGV: lua/check.lua's (counters, then the strategies' further keys;
--              N, debit, then one record per limit), all in one hash slot.
-- Reply (integers): lua/check.lua's layout, where the binding limit of an
--   admission is the one that admitted (1-based): allowed (1|0), that limit
--   (the last when none admitted),
--   retry-after µs, then per limit remaining, reset µs, retry-after µs (a
--   limit after the admitting one is not evaluated: 0 0 0). None admitting,
--   the last refuses: the end of the chain is what the caller waits for (a
--   revoked device's week is not the account's wait).
-- Complexity: the sum of the evaluated strategies' (see lua/check.lua).
local limit_count = tonumber(ARGV[1])
local debit = ARGV[2] == '1'

local now = clock_us
local reply = { 0, 0, 0 }
local chosen, last_retry = 0, 0
local a = 3
for i = 1, limit_count do
  local strategy = STRATEGIES[ARGV[a]]
  if not strategy then return redis.error_reply('ERR rate limit: unknown strategy ' .. tostring(ARGV[a])) end
  local fields = tonumber(ARGV[a + 2])
  if chosen == 0 then
    local value = nil
    if strategy.value then value = redis.call('GET', KEYS[i]) end
    local r = strategy.check(KEYS[i], value, tonumber(ARGV[a + 1]), now, unpack(ARGV, a + 3, a + 2 + fields))
    if r.allowed then
      chosen = i
      if debit then
        strategy.apply(r, now)
      else
        strategy.unwritten(r)
      end
    else
      last_retry = r.retry_us
    end
    reply[#reply + 1] = r.remaining
    reply[#reply + 1] = r.reset_us
    reply[#reply + 1] = r.retry_us
  else
    reply[#reply + 1] = 0
    reply[#reply + 1] = 0
    reply[#reply + 1] = 0
  end
  a = a + 3 + fields
end
if chosen > 0 then
  reply[1], reply[2] = 1, chosen
else
  reply[2], reply[3] = limit_count, last_retry
end
return reply
