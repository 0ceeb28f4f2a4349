-- check_token_bucket: token-bucket limits only, the common cases: one bucket
-- (the API, the LLM budget, the harvester), or a group of buckets decided
-- all-or-nothing (two rates of one caller). Without lua/check.lua's generic
-- loop: no dispatch, no table per limit, every bucket read by one MGET.
-- fragments: lib/token_bucket
-- KEYS[1..N]   the buckets (their TATs), one hash slot
-- KEYS[N+1..]  the runtime rates of the adaptive buckets, in their order
-- ARGV, the short form: one bucket, not adaptive, debited when admitted (the
--   common check): capacity, interval µs (whole µs per token), at cost 1; or
--   cost (1..capacity), capacity, interval µs. Told apart from the full form
--   by their count (2 or 3 arguments; the full form has 4 at least).
-- ARGV, the full form (a peek, an adaptive bucket, a group):
--   ARGV[1]      N, the number of buckets (1..16); -N to only read (a peek)
--   ARGV[2..3N+1]   per bucket, 3 each: cost (1..capacity), capacity, interval µs
--   ARGV[3N+2..4N+1]  only when a bucket is adaptive (then KEYS holds rate
--                keys: #KEYS > N): per bucket its keep µs (how long a runtime
--                rate stays in force; 0: not adaptive, and no rate key)
-- (Every argument costs Redis and the client ~0.1-0.2 µs: the common check
-- sends the minimal reference's two.)
-- Reply, one bucket: admitted, the bucket's debt after it (µs), one integer,
--   from which the client derives what remains (it knows capacity and
--   interval); an adaptive bucket (whose interval may be a runtime one)
--   answers an array { remaining, reset µs } instead. Refused at cost 1 in the
--   short form (the common check, and a hot key's every refusal): -1 - the
--   bucket's debt (µs), one negative integer, from which the client derives
--   remaining, reset and retry-after as for an admission; any other refusal
--   (a larger cost, a peek, an adaptive bucket): an array { remaining,
--   reset µs, retry-after µs }.
--   (A table reply costs Redis ~0.7 µs and the client more to read; one
--   integer, almost nothing: the common cases get the integer.)
--   A peek that would admit: { remaining, reset µs } of the bucket as it stands.
-- Reply, N > 1: lua/check.lua's, with its semantics: allowed (1|0), binding
--   bucket (1-based, 0 when admitted: the longest retry-after, the first of
--   equals), retry-after µs, then per bucket remaining, reset µs, retry-after
--   µs; every bucket admits and all are debited, or nothing is written.
-- Complexity: O(N) time, O(1) memory per bucket.

-- The common check first, flat and in the short form: no count to parse, no
-- helper call, no table but a refusal's at a larger cost; the same arithmetic
-- as tb_eval and tb_store (GCRA: the bucket's debt at now, plus cost tokens).
-- It returns before lib/token_bucket's functions are defined below (Redis
-- builds every function a script defines again on each call, ~0.15 µs each).
if arg_count < 4 then
  local cost, at = 1, 1
  if arg_count == 3 then cost, at = tonumber(ARGV[1]), 2 end
  local interval = tonumber(ARGV[at + 1])
  local burst = tonumber(ARGV[at]) * interval
  local now = clock_us
  local value = redis.call('GET', KEYS[1])
  local tat = value and tonumber(value) or now
  local debt = tat > now and tat - now or 0
  local new_debt = debt + cost * interval
  if new_debt > burst then
    if cost == 1 then return -1 - debt end
    return { math.floor((burst - debt) / interval), debt, new_debt - burst }
  end
  redis.call('SET', KEYS[1], string.format('%d', now + new_debt), 'PX', (key_ttl_extra_ms + math.ceil(new_debt / 1000)))
  return new_debt
end

local count = tonumber(ARGV[1])
local debit = count > 0
if not debit then count = -count end

-- Then the full form's common case, flat: a group, no bucket adaptive (no
-- rate key, no keeps); the same arithmetic again. (One bucket in the full
-- form, a peek or an adaptive one, is rare: it takes lib/token_bucket's path.)
if #KEYS == count and count > 1 then
  local now = clock_us
  local values = redis.call('MGET', unpack(KEYS, 1, count))
  -- two buckets (the common group) get the reply sized at once: a table
  -- filled entry by entry is rehashed as it grows
  local reply = count == 2 and { 1, 0, 0, 0, 0, 0, 0, 0, 0 } or { 1, 0, 0 }
  for i = 1, count do
    local at, value = 3 * i - 1, values[i]
    local cost, interval = tonumber(ARGV[at]), tonumber(ARGV[at + 2])
    local burst = tonumber(ARGV[at + 1]) * interval
    local tat = value and tonumber(value) or now
    local debt = tat > now and tat - now or 0
    local new_debt = debt + cost * interval
    local r = 3 * i
    if new_debt <= burst then
      reply[r + 1], reply[r + 2], reply[r + 3] = math.floor((burst - new_debt) / interval), new_debt, 0
    else
      local retry_us = new_debt - burst
      reply[r + 1], reply[r + 2], reply[r + 3] = math.floor((burst - debt) / interval), debt, retry_us
      if reply[1] == 1 or retry_us > reply[3] then reply[1], reply[2], reply[3] = 0, i, retry_us end
    end
  end
  if reply[1] == 1 and debit then
    for i = 1, count do
      local debt_us = reply[3 * i + 2]
      redis.call('SET', KEYS[i], string.format('%d', now + debt_us), 'PX', (key_ttl_extra_ms + math.ceil(debt_us / 1000)))
    end
    return reply
  end
  for i = 1, count do
    local r = 3 * i
    if reply[r + 3] == 0 then
      -- nothing was written: an admitted bucket reports what is left as it stands
      local cost, interval = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i + 1])
      reply[r + 1], reply[r + 2] = reply[r + 1] + cost, reply[r + 2] - cost * interval
    end
  end
  return reply
end

-- <fragments>: lib/token_bucket follows here, for the adaptive buckets and a
-- lone bucket's peek

-- Bucket i's record, read in order 1..N: cost, capacity, interval µs, keep µs,
-- and its runtime-rate key (nil: not adaptive; they follow the buckets in order).
-- The keeps are sent only when a bucket is adaptive (it has a rate key).
local rate_keys, keeps = count, #KEYS > count
local function bucket(i)
  local at = 3 * i - 1
  local keep_us = keeps and tonumber(ARGV[3 * count + 1 + i]) or 0
  local rate_key = nil
  if keep_us > 0 then
    rate_keys = rate_keys + 1
    rate_key = KEYS[rate_keys]
  end
  return tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), keep_us, rate_key
end

local values = redis.call('MGET', unpack(KEYS, 1, count))
local now = clock_us

if count == 1 then
  local cost, capacity, interval_us, keep_us, rate_key = bucket(1)
  local admitted, remaining, reset_us, retry_us, lapsed_key, debt =
    tb_eval(tb_parse(values[1]), rate_key, capacity, interval_us, keep_us, cost, now)
  if admitted then
    if not debit then return { remaining + cost, debt } end
    tb_write(KEYS[1], reset_us, now, lapsed_key)
    if rate_key then return { remaining, reset_us } end
    return reset_us
  end
  return { remaining, reset_us, retry_us }
end

-- A group: the reply is filled in as the buckets are read; what an admitted
-- bucket reports unwritten (remaining, debt as it stands) is kept by index,
-- and a lapsed rate key (rare: an adaptive bucket's) in a table made for it.
local reply = { 1, 0, 0 }
local unwritten, lapsed = {}, nil
for i = 1, count do
  local cost, capacity, interval_us, keep_us, rate_key = bucket(i)
  local admitted, remaining, reset_us, retry_us, lapsed_key, debt =
    tb_eval(tb_parse(values[i]), rate_key, capacity, interval_us, keep_us, cost, now)
  local at = 3 * i
  reply[at + 1], reply[at + 2], reply[at + 3] = remaining, reset_us, retry_us
  if admitted then
    unwritten[2 * i - 1], unwritten[2 * i] = remaining + cost, debt
    if lapsed_key then
      lapsed = lapsed or {}
      lapsed[i] = lapsed_key
    end
  elseif reply[1] == 1 or retry_us > reply[3] then
    reply[1], reply[2], reply[3] = 0, i, retry_us
  end
end

if reply[1] == 1 and debit then
  for i = 1, count do
    tb_write(KEYS[i], reply[3 * i + 2], now, lapsed and lapsed[i])
  end
  return reply
end
-- nothing was written: an admitted bucket reports what is left as it stands
for i = 1, count do
  if unwritten[2 * i] then reply[3 * i + 1], reply[3 * i + 2] = unwritten[2 * i - 1], unwritten[2 * i] end
end
return reply
