-- check_token_bucket: one token-bucket limit, the common case, without the
-- generic multi-limit loop (fewer closures and arguments per call).
-- fragments: lib/token_bucket
-- Reply (integers): allowed (1|0), binding limit (0 admitted, 1 refused),
--   retry-after µs, remaining, reset µs, retry-after µs (as check.lua, one limit).
-- Complexity: O(1) time and memory.
local bucket_key = KEYS[1] -- the bucket (its TAT)
local rate_key = KEYS[2] -- optional: its runtime rate (adaptive buckets), same hash slot
local cost = tonumber(ARGV[1]) -- tokens this request takes, 1..capacity
local capacity = tonumber(ARGV[2]) -- tokens the bucket holds
local interval_us = tonumber(ARGV[3]) -- whole µs to refill one token
local keep_us = tonumber(ARGV[4]) -- how long a runtime rate stays in force (0: not adaptive)
local debit = ARGV[5] == '1' -- '0': only read (peek)

local now = now_us()
local r = tb_eval(bucket_key, rate_key, capacity, interval_us, keep_us, cost, now)
if r.allowed then
  if debit then tb_apply(r) end
  return { 1, 0, 0, r.remaining, r.reset_us, 0 }
end
return { 0, 1, r.retry_us, r.remaining, r.reset_us, r.retry_us }
