-- check: one or more limits decided together, all-or-nothing.
-- Either every limit admits and all are debited, or nothing is written and the
-- reply names the limit that binds (the longest retry-after).
-- fragments: <strategies>
--
-- Dispatch: every registered strategy (layer/src/strategies/index.ts) brings
-- its fragment, and the assembler (layer/src/scripts.ts) defines
--   STRATEGIES[kind] = { check = <kind>_check, apply = <kind>_apply, unwritten = <kind>_unwritten,
--                       value = <its unit's valueCounter> }
-- where, for a fragment of kind `xx`:
--   xx_check(key, value, cost, now, field...) -> r: reads only; r.allowed, r.remaining,
--     r.reset_us, r.retry_us (what an admission would leave; the state before a refusal);
--     `value` is the counter's string value (false: no key) for a strategy
--     registered with `value = true` (its counter is one short string), nil
--     for the others, which read their own state
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
-- ARGV after the records, optional: 'claim', the index in KEYS of a once-only
--              claim key (same slot), its TTL ms, '1' to keep it when refused,
--              the attempt's token, and for how long (ms, 0: never) a claim
--              is pending. The claim's value is '<token>:<Redis ms taken>';
--              only that attempt settles it (lua/settle_claim.lua: given back,
--              or marked delivered, ':d' appended; layer/src/core/claim.ts).
--              A claim already taken answers { 2 } (duplicate), or { 3 }
--              (pending) while younger than the pending time: nothing counted,
--              nothing written. One with a pending time, older and still
--              unmarked, is taken over (its attempt died mid-put), as is no
--              claim: the claim is set with an admission (debited), or a
--              refusal when kept.
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

-- First pass: each record's strategy and where it starts, and the counters
-- kept as one short value (a bucket's TAT, a quota's count), fetched together
-- below: one MGET costs Redis about what one GET does.
local strategies, records, fetched = {}, {}, {}
local a = 3
for i = 1, limit_count do
  local strategy = STRATEGIES[ARGV[a]]
  if not strategy then return redis.error_reply('ERR rate limit: unknown strategy ' .. tostring(ARGV[a])) end
  strategies[i], records[i] = strategy, a
  if strategy.value then fetched[#fetched + 1] = KEYS[i] end
  a = a + 3 + tonumber(ARGV[a + 2])
end
local claim_key, claim_ttl_ms, claim_kept, claim_token, claim_pending_ms
if ARGV[a] == 'claim' then
  claim_key, claim_ttl_ms, claim_kept = KEYS[tonumber(ARGV[a + 1])], tonumber(ARGV[a + 2]), ARGV[a + 3] == '1'
  claim_token, claim_pending_ms = ARGV[a + 4], tonumber(ARGV[a + 5])
  -- GET, not EXISTS: the functions' ACL user runs only the commands it needs
  -- (the claim's reading, inline as in lua/check_sliding_window.lua: a shared function would be built on every call)
  local held = redis.call('GET', claim_key)
  if held then
    -- '<token>:<Redis ms taken>': its event not yet marked handed on (lua/settle_claim.lua adds ':d');
    -- anything else (delivered, or a claim with no pending time) is a duplicate
    local taken_ms = claim_pending_ms > 0 and tonumber(string.match(held, '^[^:]*:(%d+)$'))
    if not taken_ms then return { 2 } end
    -- younger than the pending time: its attempt may still hand it on or give it back. Younger in
    -- either direction: a claim stamped far ahead (Redis' clock stepped back, a failover to a node behind)
    -- would otherwise hold every delivery off until the clock caught up
    local age_ms = clock_us / 1000 - taken_ms
    if age_ms < claim_pending_ms and age_ms > -claim_pending_ms then return { 3 } end
    -- older and neither marked nor given back: its attempt died mid-put. Taken over: decided
    -- afresh, and an admission overwrites it with this attempt's (a refusal too when kept; else leaves it)
  end
end
local values = #fetched > 0 and redis.call('MGET', unpack(fetched)) or fetched

local now = clock_us
-- the claim's value: this attempt's token, and when it was taken (Redis ms)
local claim_value = claim_key and claim_token .. ':' .. string.format('%d', math.floor(now / 1000))
local results = {}
local allowed, binding, retry_max = true, 0, 0
local v = 0
for i = 1, limit_count do
  local strategy, at = strategies[i], records[i]
  local value = nil
  if strategy.value then
    v = v + 1
    value = values[v]
  end
  local r = strategy.check(KEYS[i], value, tonumber(ARGV[at + 1]), now, unpack(ARGV, at + 3, at + 2 + tonumber(ARGV[at + 2])))
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
    strategies[i].apply(r, now)
  elseif r.allowed then
    -- nothing was written: report what is left as it stands
    strategies[i].unwritten(r)
  end
end
-- after the counters: at maxmemory an admission fails whole at its first write
if claim_key and debit and (allowed or claim_kept) then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end

local reply = { allowed and 1 or 0, binding, retry_max }
for i = 1, limit_count do
  local r = results[i]
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset_us
  reply[#reply + 1] = r.retry_us
end
return reply
