-- check: one or more limits decided together, all-or-nothing.
-- Either every limit admits and all are debited, or nothing is written and the
-- reply names the limit that binds (the longest retry-after).
-- fragments: lib/token_bucket lib/sliding_window lib/failure_backoff
--
-- KEYS[1..N]   the counter key of limit i. On Redis Cluster they share one hash
--              slot: the client gives every key of a check the same hash tag,
--              the check's scope (see layer/src/keys.ts).
-- KEYS[N+1..]  runtime-rate keys of adaptive token buckets, referenced from ARGV.
-- ARGV[1]      N, the number of limits (1..16)
-- ARGV[2]      '1' to debit when admitted, '0' to only read (peek)
-- ARGV[3..]    one record of RECORD fields per limit (read_limit below):
--                kind, cost, then by kind:
--                'tb' token bucket:    capacity, interval µs, runtime-rate keep µs, rate key index (0: none)
--                'sw' sliding window:  limit, window µs, -, -
--                'bo' failure backoff: base µs, max µs, free failures, memory µs
-- Reply (integers): allowed (1|0), binding limit (1-based, 0 when admitted),
--   retry-after µs, then per limit: remaining, reset µs, retry-after µs.
--   `remaining` is what is left: after the debit when the check was admitted
--   and debited, as it stands otherwise (a refusal, a peek).
-- Complexity: time O(1) per bucket or backoff, O(cost) amortised (O(cost + log limit)
-- worst case) per sliding window; memory O(1) per bucket, O(limit) per window.
-- No `#!lua` shebang, deliberately: Redis then checks OOM at the first
-- deny-OOM write, so a denied check (no writes) still answers at maxmemory
-- under noeviction, while an admit fails whole before writing anything.
local limit_count = tonumber(ARGV[1])
local debit = ARGV[2] == '1'
local RECORD = 6

-- The fields of limit i, by name.
local function read_limit(i)
  local a = 2 + (i - 1) * RECORD
  return ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]),
    tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
end

local now = now_us()
local results = {}
local allowed, binding, retry_max = true, 0, 0

for i = 1, limit_count do
  local kind, cost, f1, f2, f3, f4 = read_limit(i)
  local key = KEYS[i]
  local r
  if kind == 'tb' then
    local capacity, interval_us, keep_us, rate_index = f1, f2, f3, f4
    r = { key = key, kind = 'tb', cost = cost }
    r.allowed, r.remaining, r.reset_us, r.retry_us, r.lapsed_key, r.debt =
      tb_eval(key, rate_index > 0 and KEYS[rate_index] or nil, capacity, interval_us, keep_us, cost, now)
  elseif kind == 'sw' then
    local limit, window_us = f1, f2
    r = sw_eval(key, limit, window_us, cost, now)
  elseif kind == 'bo' then
    local base_us, max_us, free, memory_us = f1, f2, f3, f4
    r = bo_eval(key, base_us, max_us, free, memory_us, now)
  else
    return redis.error_reply('ERR rate limit: unknown strategy ' .. tostring(kind))
  end
  results[i] = r
  if not r.allowed then
    allowed = false
    if r.retry_us > retry_max or binding == 0 then
      binding, retry_max = i, r.retry_us
    end
  end
end

if allowed and debit then
  for i = 1, limit_count do
    local r = results[i]
    if r.kind == 'tb' then tb_apply(r.key, r.reset_us, now, r.lapsed_key) elseif r.kind == 'sw' then sw_apply(r) end
  end
else
  -- Nothing was written: a limit that would have admitted reports what is
  -- left as it stands, not what the admission would have left.
  for i = 1, limit_count do
    local r = results[i]
    if r.allowed then
      if r.kind == 'tb' then
        r.remaining, r.reset_us = r.remaining + r.cost, r.debt
      elseif r.kind == 'sw' then
        sw_unwritten(r)
      end
    end
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
