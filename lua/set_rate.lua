-- set_rate: reads or changes a token bucket's refill rate at runtime, for
-- every worker at its next check (the rate lives in Redis beside the bucket).
-- fragments: lib/token_bucket
-- Reply: the rate in force afterwards (tokens per second), as a string.
-- The tokens the bucket holds are kept across a change: its debt is
-- re-expressed at the new interval (tb_rescale). A pause (a source's
-- Retry-After) is a point in time, kept in the rate key: a later change of
-- rate does not shorten it. Complexity: O(1) time and memory.
local bucket_key = KEYS[1] -- the bucket (its TAT)
local rate_key = KEYS[2] -- its runtime rate "<tokens/s> <µs set>", same hash slot
local change = ARGV[1] -- 'get' (read only), 'set', 'increase' (additive), 'decrease' (multiplicative)
local amount = tonumber(ARGV[2]) -- set: the rate; increase: tokens/s added; decrease: the factor (0..1)
local min_rate = tonumber(ARGV[3]) -- bounds of the runtime rate, tokens/s
local max_rate = tonumber(ARGV[4])
local policy_rate = tonumber(ARGV[5]) -- the policy's rate, tokens/s, in force when no runtime rate is
local policy_interval_us = tonumber(ARGV[6]) -- the policy's whole µs per token
local keep_us = tonumber(ARGV[7]) -- how long a runtime rate stays in force after its last change
local pause_us = tonumber(ARGV[8]) -- no token for this long (a source's Retry-After), 0 for none
local capacity = tonumber(ARGV[9]) -- the bucket's capacity

local now = clock_us
local tat, interval_in_force, runtime_rate, _, paused_until =
  tb_read(tb_stored(bucket_key), rate_key, policy_interval_us, keep_us, now)
local old = runtime_rate or policy_rate
if change == 'get' then return string.format('%.17g', old) end

local rate
if change == 'set' then
  rate = amount
elseif change == 'increase' then
  rate = old + amount
elseif change == 'decrease' then
  rate = old * amount
else
  return redis.error_reply('ERR rate limit: unknown rate change ' .. tostring(change))
end
rate = math.max(min_rate, math.min(max_rate, rate))
local interval = tb_interval_of(rate)
-- Inside an earlier pause, the pause stays a point in time; the tokens owed past it are rescaled.
local debt = tb_rescale_after(tat, math.max(now, paused_until), interval_in_force, interval) - now
if pause_us > 0 then paused_until = math.max(paused_until, now + pause_us) end
local paused_for = math.max(0, paused_until - now)
if paused_for > 0 then
  -- no token until the pause ends: an admission needs debt + interval <= capacity * interval
  debt = math.max(debt, paused_for + (capacity - 1) * interval)
end

local rate_text = string.format('%.17g', rate)
local stored = rate_text .. ' ' .. string.format('%d', now)
if paused_for > 0 then stored = stored .. ' ' .. string.format('%d', paused_until) end
-- The rate key outlives `keep` by as long as the bucket can owe at this rate,
-- so a check after the lapse still finds it and folds the debt (tb_read).
local rate_ttl_ms = math.ceil((keep_us + paused_for + capacity * interval) / 1000)
redis.call('SET', rate_key, stored, 'PX', (key_ttl_extra_ms + rate_ttl_ms))
-- a full bucket deletes the key: a TAT left from a lapsed rate must not be read at the new one
tb_store(bucket_key, debt, now)
return rate_text
