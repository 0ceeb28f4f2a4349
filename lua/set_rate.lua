-- set_rate: changes a token bucket's refill rate at runtime, for every worker
-- at its next check (the rate lives in Redis beside the bucket).
-- KEYS[1]  the bucket (GCRA TAT), KEYS[2] its rate key (same hash slot),
--          holding "<tokens/s> <µs set>"
-- ARGV[1]  mode: 'set' (rate = amount), 'increase' (rate + amount, additive),
--          'decrease' (rate * amount, multiplicative, 0 < amount < 1)
-- ARGV[2]  amount; ARGV[3] min rate; ARGV[4] max rate (tokens per second)
-- ARGV[5]  the policy's rate, used when no runtime rate is set
-- ARGV[6]  µs the runtime rate stays in force after its last change
-- ARGV[7]  µs to pause the bucket for (a source's Retry-After), 0 for none
-- ARGV[8]  the bucket's capacity
-- Reply: the new rate (tokens per second) as a string.
-- The tokens the bucket holds are kept across the change: the bucket's debt
-- (TAT - now) is rescaled by old/new rate. Complexity: O(1) time and memory.
local now = now_us()
local mode, amount = ARGV[1], tonumber(ARGV[2])
local min_rate, max_rate = tonumber(ARGV[3]), tonumber(ARGV[4])
local keep_us = tonumber(ARGV[6])
local old = tb_runtime_rate(KEYS[2], keep_us, now) or tonumber(ARGV[5])
local rate
if mode == 'set' then
  rate = amount
elseif mode == 'increase' then
  rate = old + amount
elseif mode == 'decrease' then
  rate = old * amount
else
  return redis.error_reply('ERR rate limit: unknown rate change ' .. tostring(mode))
end
rate = math.max(min_rate, math.min(max_rate, rate))
local rate_text = string.format('%.17g', rate)
redis.call('SET', KEYS[2], rate_text .. ' ' .. string.format('%d', now), 'PX', key_ttl_ms(math.ceil(keep_us / 1000)))

local interval = 1000000 / rate
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
tat = now + (tat - now) * old / rate
local pause = tonumber(ARGV[7])
if pause > 0 then
  -- no token until now + pause: admission needs tat + interval - now <= capacity * interval
  tat = math.max(tat, now + pause + (tonumber(ARGV[8]) - 1) * interval)
end
if tat > now then
  tat = math.ceil(tat)
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', key_ttl_ms(math.max(1, math.ceil((tat - now) / 1000))))
end
return rate_text
