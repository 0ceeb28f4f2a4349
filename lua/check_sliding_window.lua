-- check_sliding_window: one sliding-window limit, the common case, without the
-- generic multi-limit loop.
-- fragments: lib/sliding_window
-- Reply: admitted, what remains (one integer; the window resets a whole
--   window after this admission). Refused: an array { remaining, reset µs,
--   retry-after µs }. (A table reply costs Redis ~0.7 µs; the common case
--   gets the integer.) A peek that would admit: { remaining, reset µs } of
--   the window as it stands (nothing was written).
-- Complexity: O(cost) amortised, O(cost + log limit) worst case; memory O(limit).
local window_key = KEYS[1] -- the window (a ring of admission times)
local cost = tonumber(ARGV[1]) -- events this request adds, 1..min(limit, 1024)
local limit = tonumber(ARGV[2]) -- events allowed in any window
local window_us = tonumber(ARGV[3]) -- the window, whole ms in µs
local debit = ARGV[4] == '1' -- '0': only read (peek)

local now = now_us()
local r = sw_eval(window_key, limit, window_us, cost, now)
if r.allowed then
  if not debit then
    sw_unwritten(r)
    return { r.remaining, r.reset_us }
  end
  sw_apply(r)
  return r.remaining
end
return { r.remaining, r.reset_us, r.retry_us }
