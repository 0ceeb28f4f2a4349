-- Token bucket, stored as GCRA: the whole state of a bucket is one integer,
-- its "theoretical arrival time" (TAT, µs). The bucket is full when TAT <= now;
-- every token taken pushes TAT one refill interval further. This is exactly a
-- token bucket with `capacity` tokens refilled one per `interval_us`, but it
-- costs one small integer string per key (see the benchmarks for bytes/key).
--
--   key         the bucket; a missing key is a full bucket
--   rate_key    optional: a runtime rate set by set_rate, "<tokens/s> <µs set>"
--   capacity    tokens the bucket holds (the burst)
--   interval_us µs to refill one token (float; the policy's rate)
--   keep_us     how long a runtime rate stays in force after it was set
--   cost        tokens this request takes (>= 1)
-- Returns a result table; nothing is written here (see tb_apply).
-- Complexity: O(1) time, O(1) memory.
-- The runtime rate of a bucket (tokens/s), or nil when none is in force.
local function tb_runtime_rate(rate_key, keep_us, now)
  local v = redis.call('GET', rate_key)
  if not v then return nil end
  local rate, set_at = string.match(v, '^(%S+) (%S+)$')
  rate, set_at = tonumber(rate), tonumber(set_at)
  if rate == nil or rate <= 0 or now - set_at >= keep_us then return nil end
  return rate
end

local function tb_eval(key, rate_key, capacity, interval_us, keep_us, cost, now)
  if rate_key then
    local rate = tb_runtime_rate(rate_key, keep_us, now)
    if rate then interval_us = 1000000 / rate end
  end
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  local tolerance = capacity * interval_us
  local new_tat = tat + cost * interval_us
  local r = { key = key, kind = 'tb', limit = capacity }
  if new_tat - now <= tolerance then
    r.allowed = true
    r.new_tat = math.ceil(new_tat)
    r.remaining = math.floor((tolerance - (new_tat - now)) / interval_us)
    r.reset_us = math.ceil(new_tat - now)
    r.retry_us = 0
  else
    r.allowed = false
    r.remaining = math.floor((tolerance - (tat - now)) / interval_us)
    r.reset_us = math.ceil(tat - now)
    -- exactly when `cost` tokens will be back in the bucket
    r.retry_us = math.ceil(new_tat - tolerance - now)
  end
  return r
end

-- Debits an admitted request: one SET with its expiry, so the key is gone the
-- moment the bucket is full again (an idle key costs nothing).
local function tb_apply(r, now)
  local ttl_ms = math.max(1, math.ceil((r.new_tat - now) / 1000))
  redis.call('SET', r.key, string.format('%d', r.new_tat), 'PX', key_ttl_ms(ttl_ms))
end
