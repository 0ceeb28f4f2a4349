-- check: one or more limits decided together, all-or-nothing.
-- Either every limit admits and all are debited, or nothing is written and the
-- reply names the limit that binds (the longest retry-after).
--
-- KEYS[1..N]   the counter key of limit i. On Redis Cluster they must share one
--              hash slot: the client gives every key of a policy group the same
--              hash tag (see layer/src/keys.ts).
-- KEYS[N+1..]  dynamic-rate keys of token buckets, referenced from ARGV.
-- ARGV[1]      N, the number of limits
-- ARGV[2]      '1' to debit when admitted, '0' to only read (peek)
-- ARGV[3..]    seven per limit: strategy, cost, p1, p2, p3, p4, rate key index (0: none)
--                'tb' token bucket:     p1 capacity, p2 µs per token, p3 runtime-rate keep µs
--                'sw' sliding window:   p1 limit,    p2 window µs
--                'bo' failure backoff:  p1 base µs,  p2 max µs, p3 free failures, p4 memory µs
-- Reply (integers): allowed (1|0), binding limit (1-based, 0 when admitted),
--   retry-after µs, then per limit: remaining, reset µs, retry-after µs.
-- Complexity: time O(1) per bucket or backoff, O(cost) amortised (O(cost + log limit)
-- worst case) per sliding window; memory O(1) per bucket, O(limit) per window.
-- No `#!lua` shebang, deliberately: Redis then checks OOM at the first
-- deny-OOM write, so a denied check (no writes) still answers at maxmemory
-- under noeviction, while an admit fails whole before writing anything.

local now = now_us()
local count = tonumber(ARGV[1])
local debit = ARGV[2] == '1'
local results = {}
local allowed, binding, retry_max = true, 0, 0

for i = 1, count do
  local a = 2 + (i - 1) * 7
  local strategy, cost = ARGV[a + 1], tonumber(ARGV[a + 2])
  local p1, p2, p3, p4 = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
  local rate_index = tonumber(ARGV[a + 7])
  local r
  if strategy == 'tb' then
    r = tb_eval(KEYS[i], rate_index > 0 and KEYS[rate_index] or nil, p1, p2, p3, cost, now)
  elseif strategy == 'sw' then
    r = sw_eval(KEYS[i], p1, p2, cost, now)
  elseif strategy == 'bo' then
    r = bo_eval(KEYS[i], p1, p2, p3, p4, now)
  else
    return redis.error_reply('ERR rate limit: unknown strategy ' .. tostring(strategy))
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
  for i = 1, count do
    local r = results[i]
    if r.kind == 'tb' then tb_apply(r, now) elseif r.kind == 'sw' then sw_apply(r) end
  end
end

local reply = { allowed and 1 or 0, binding, retry_max }
for i = 1, count do
  local r = results[i]
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset_us
  reply[#reply + 1] = r.retry_us
end
return reply
