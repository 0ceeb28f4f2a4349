-- check_sliding_window: one sliding-window limit, the common case, without the
-- generic multi-limit loop.
-- KEYS[1]  the window
-- ARGV[1]  cost; ARGV[2] limit; ARGV[3] window µs
-- ARGV[4]  '1' to debit when admitted, '0' to only read
-- Reply: as check.lua with one limit: allowed, binding, retry-after µs,
--   remaining, reset µs, retry-after µs.
-- Complexity: O(cost) amortised, O(cost + log limit) worst case; memory O(limit).
local now = now_us()
local r = sw_eval(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[1]), now)
if r.allowed then
  if ARGV[4] == '1' then sw_apply(r) end
  return { 1, 0, 0, r.remaining, r.reset_us, 0 }
end
return { 0, 1, r.retry_us, r.remaining, r.reset_us, r.retry_us }
