-- Token bucket, stored as GCRA: the whole state of a bucket is one integer,
-- its "theoretical arrival time" (TAT, µs). The bucket is full when TAT <= now;
-- every token taken pushes TAT one refill interval further. This is exactly a
-- token bucket with `capacity` tokens refilled one per `interval_us`, at the
-- cost of one small integer string per key.
--
-- Arithmetic is exact by design: every quantity is a whole number of µs below
-- 2^53 (the policy schema bounds capacity x interval, see layer/src/policy.ts),
-- so Lua's doubles add, compare and divide them without rounding. The policy's
-- interval is rounded up to a whole µs once, in TypeScript; a runtime rate is
-- rounded the same way here (tb_interval_of). Rounding up never refills faster
-- than configured.
-- Complexity: O(1) time and memory.

-- The bucket's stored state, read and written here only: its TAT (µs), or
-- no key for a full bucket. tb_parse reads a stored value (nil or false:
-- full), tb_stored the key's raw TAT (nil: full); tb_debt what the bucket
-- owes at `now` (µs, never below 0); tb_store writes a debt, with an expiry
-- at the moment the bucket is full again (an idle key costs nothing), or
-- deletes the key when nothing is owed.
local function tb_parse(value)
  return value and tonumber(value) or nil
end

local function tb_stored(key)
  return tb_parse(redis.call('GET', key))
end

local function tb_debt(key, now)
  local tat = tb_stored(key) or now
  return tat > now and tat - now or 0
end

local function tb_store(key, debt_us, now)
  if debt_us > 0 then
    redis.call('SET', key, string.format('%d', now + debt_us), 'PX', (key_ttl_extra_ms + math.max(1, math.ceil(debt_us / 1000))))
  else
    redis.call('DEL', key)
  end
end

-- µs per token of a runtime rate (tokens/s), rounded up to a whole µs. A
-- quotient within 1e-9 of a whole number is that number: a decimal rate such
-- as 0.1/s is not exact in binary, and must not cost a µs for it.
local function tb_interval_of(rate)
  local exact = 1000000 / rate
  local whole = math.floor(exact + 0.5)
  if math.abs(exact - whole) <= 1e-9 * exact then return math.max(1, whole) end
  return math.ceil(exact)
end

-- A runtime rate as set_rate stores it ("<tokens/s> <µs set>[ <µs paused until>]"),
-- or nil: the rate, when it was set, and until when no token is given (0: no pause).
local function tb_read_rate(rate_key)
  local v = redis.call('GET', rate_key)
  if not v then return nil end
  local rate, set_at, paused_until = string.match(v, '^(%S+) (%d+) ?(%d*)$')
  rate, set_at = tonumber(rate), tonumber(set_at)
  if rate == nil or set_at == nil or rate <= 0 then return nil end
  return rate, set_at, tonumber(paused_until) or 0
end

-- The same tokens owed, re-expressed at another interval: the whole tokens
-- owed are kept exactly, and the fraction of one is rounded up, so a rate
-- change never hands out a token.
local function tb_rescale(debt_us, from_us, to_us)
  local tokens = math.floor(debt_us / from_us)
  local rest = debt_us - tokens * from_us
  return tokens * to_us + math.ceil(rest * to_us / from_us)
end

-- A TAT re-expressed at another interval from `anchor` on: the debt up to the
-- anchor (the end of a pause, a point in time) is kept as time, the tokens
-- owed past it are rescaled. Rescaling a pause as tokens would stretch it by
-- the ratio of the intervals (a day at 1 µs a token is 8.64e10 tokens).
local function tb_rescale_after(tat, anchor, from_us, to_us)
  if tat <= anchor then return tat end
  return anchor + tb_rescale(tat - anchor, from_us, to_us)
end

-- The bucket as of `now`: its TAT (µs, at the interval in force, never before
-- now), that interval, the runtime rate in force (nil: the policy's), whether
-- a lapsed runtime rate was folded in, and until when a pause holds (0: none).
-- At the lapse the debt run up at the runtime rate is owed in tokens and
-- drains at the policy rate from then on (a pause still running is kept to
-- its end); the lapsed rate key must go when the bucket is next written, or
-- the next read would fold the same debt twice. `stored` is the bucket's TAT
-- as read (tb_stored, or tb_parse of a value its caller fetched; nil: full).
local function tb_read(stored, rate_key, interval_us, keep_us, now)
  local tat = stored or now
  local runtime_rate, lapsed, paused_until = nil, false, 0
  if rate_key then
    local rate, set_at, paused = tb_read_rate(rate_key)
    if rate then
      paused_until = paused
      local runtime_us = tb_interval_of(rate)
      local lapse_at = set_at + keep_us
      if now < lapse_at then
        runtime_rate, interval_us = rate, runtime_us
      else
        -- only a stored TAT is a debt: `now` standing in for a full bucket is not one
        if stored then tat = tb_rescale_after(stored, math.max(lapse_at, paused_until), runtime_us, interval_us) end
        lapsed = true
      end
    end
  end
  if tat < now then tat = now end
  return tat, interval_us, runtime_rate, lapsed, paused_until
end

--   stored      the bucket's TAT as read (nil: a full bucket)
--   rate_key    optional: its runtime rate (adaptive buckets)
--   capacity    tokens the bucket holds (the burst)
--   interval_us whole µs to refill one token (the policy's rate)
--   keep_us     how long a runtime rate stays in force after it was set
--   cost        tokens this request takes (1..capacity)
-- Returns, as values (no table: this is the hot path): admitted, remaining,
-- reset µs (the debt after an admission, before a refusal), retry-after µs,
-- the lapsed rate key to delete when the admission is written (or nil), and
-- the debt as it stands (µs): what an admission that is not written (a peek,
-- or a grouped check another limit refused) reports as its reset, with
-- `remaining + cost` tokens left. Nothing is written here (see tb_write).
local function tb_eval(stored, rate_key, capacity, interval_us, keep_us, cost, now)
  local tat, interval, lapsed, _ = stored or now, interval_us, false, nil
  if rate_key then
    tat, interval, _, lapsed = tb_read(stored, rate_key, interval_us, keep_us, now)
  elseif tat < now then
    tat = now -- the common bucket, not adaptive: tb_read's work without its call
  end
  local burst = capacity * interval -- how far TAT may run ahead of now
  local debt = tat - now
  local new_debt = debt + cost * interval
  local lapsed_key = lapsed and rate_key or nil
  if new_debt <= burst then
    return true, math.floor((burst - new_debt) / interval), new_debt, 0, lapsed_key, debt
  end
  -- remaining is negative while a pause (a source's Retry-After) holds the
  -- bucket past empty; the retry-after is exactly when `cost` tokens are back:
  -- waiting this long admits, 1 µs less does not
  return false, math.floor((burst - debt) / interval), debt, new_debt - burst, lapsed_key, debt
end

-- Debits an admitted request that leaves the bucket owing `debt_us` (> 0).
local function tb_write(key, debt_us, now, lapsed_key)
  tb_store(key, debt_us, now)
  if lapsed_key then redis.call('DEL', lapsed_key) end
end

-- As a strategy of lua/check.lua (see its header): check, apply, unwritten;
-- its counter is a value check.lua fetches (one MGET for a whole check).
-- Record fields: capacity, interval µs, runtime-rate keep µs, rate key index (0: none).
local function tb_check(key, value, cost, now, capacity, interval_us, keep_us, rate_index)
  rate_index = tonumber(rate_index)
  local allowed, remaining, reset_us, retry_us, lapsed_key, debt = tb_eval(
    tb_parse(value),
    rate_index > 0 and KEYS[rate_index] or nil,
    tonumber(capacity),
    tonumber(interval_us),
    tonumber(keep_us),
    cost,
    now
  )
  -- one constructor: the table is sized once (adding fields later rehashes it)
  return {
    key = key,
    cost = cost,
    allowed = allowed,
    remaining = remaining,
    reset_us = reset_us,
    retry_us = retry_us,
    lapsed_key = lapsed_key,
    debt = debt,
  }
end

local function tb_apply(r, now)
  tb_write(r.key, r.reset_us, now, r.lapsed_key)
end

local function tb_unwritten(r)
  r.remaining, r.reset_us = r.remaining + r.cost, r.debt
end
