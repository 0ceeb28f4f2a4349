-- check: one or more limits decided together, all-or-nothing.
-- Either every limit admits and all are debited, or nothing is written and the
-- reply names the limit that binds (the longest retry-after).
-- fragments: <strategies>
--
-- Dispatch: every registered strategy (layer/src/strategies/index.ts) brings
-- its fragment, and the assembler (layer/src/scripts.ts) defines
--   STRATEGIES[kind] = { check = <kind>_check, apply = <kind>_apply, unwritten = <kind>_unwritten }
-- where, for a fragment of kind `xx`:
--   xx_check(key, cost, now, field...) -> r: reads only; r.allowed, r.remaining,
--     r.reset_us, r.retry_us (what an admission would leave; the state before a refusal)
--   xx_apply(r, now): writes an admission (every limit admitted, debit asked)
--   xx_unwritten(r): an admission left unwritten re-expresses r.remaining and
--     r.reset_us as the counter stands (a peek, or another limit refused)
--
-- KEYS[1..N]   the counter key of limit i. On Redis Cluster they share one hash
--              slot: the client gives every key of a check the same hash tag,
--              the check's scope (see layer/src/keys.ts).
-- KEYS[N+1..]  further keys of a strategy (an adaptive bucket's runtime rate),
--              referenced by index from its fields.
-- ARGV[1]      N, the number of limits (1..16)
-- ARGV[2]      '1' to debit when admitted, '0' to only read (peek)
-- ARGV[3..]    one record per limit: kind, cost, field count F, then F fields
--              (each strategy's fields: its fragment's <kind>_check and its
--              module's checkFields in layer/src/strategies/)
-- Reply (integers): allowed (1|0), binding limit (1-based, 0 when admitted),
--   retry-after µs, then per limit: remaining, reset µs, retry-after µs.
--   `remaining` is what is left: after the debit when the check was admitted
--   and debited, as it stands otherwise (a refusal, a peek).
-- Complexity: the sum of the strategies' (O(1) per bucket or backoff, O(cost)
-- amortised, O(cost + log limit) worst case, per sliding window).
-- No `#!lua` shebang, deliberately: Redis then checks OOM at the first
-- deny-OOM write, so a denied check (no writes) still answers at maxmemory
-- under noeviction, while an admit fails whole before writing anything.
local limit_count = tonumber(ARGV[1])
local debit = ARGV[2] == '1'

local now = now_us()
local results = {}
local allowed, binding, retry_max = true, 0, 0

local a = 3
for i = 1, limit_count do
  local kind, cost, field_count = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local strategy = STRATEGIES[kind]
  if not strategy then return redis.error_reply('ERR rate limit: unknown strategy ' .. tostring(kind)) end
  local r = strategy.check(KEYS[i], cost, now, unpack(ARGV, a + 3, a + 2 + field_count))
  a = a + 3 + field_count
  r.strategy = strategy
  results[i] = r
  if not r.allowed then
    allowed = false
    if r.retry_us > retry_max or binding == 0 then
      binding, retry_max = i, r.retry_us
    end
  end
end

local written = allowed and debit
for i = 1, limit_count do
  local r = results[i]
  if written then
    r.strategy.apply(r, now)
  elseif r.allowed then
    -- nothing was written: report what is left as it stands
    r.strategy.unwritten(r)
  end
end

local reply = { allowed and 1 or 0, binding, retry_max }
for i = 1, limit_count do
  local r = results[i]
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset_us
  reply[#reply + 1] = r.retry_us
end
return reply
