-- check_token_bucket: one token-bucket limit, the common case, without the
-- generic multi-limit loop (fewer closures and arguments per call).
-- KEYS[1]  the bucket; KEYS[2] optional runtime-rate key
-- ARGV[1]  cost; ARGV[2] capacity; ARGV[3] µs per token; ARGV[4] runtime-rate keep µs
-- ARGV[5]  '1' to debit when admitted, '0' to only read
-- Reply: as check.lua with one limit: allowed, binding, retry-after µs,
--   remaining, reset µs, retry-after µs. Complexity: O(1) time and memory.
local now = now_us()
local r = tb_eval(KEYS[1], KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[1]), now)
if r.allowed then
  if ARGV[5] == '1' then tb_apply(r, now) end
  return { 1, 0, 0, r.remaining, r.reset_us, 0 }
end
return { 0, 1, r.retry_us, r.remaining, r.reset_us, r.retry_us }
