-- check_token_bucket: one token-bucket limit, the common case, without the
-- generic multi-limit loop (fewer closures and arguments per call).
-- fragments: lib/token_bucket
-- Reply: admitted, the bucket's debt after it (µs), one integer, from which
--   the client derives what remains (it knows capacity and interval); an
--   adaptive bucket (whose interval may be a runtime one) answers an array
--   { remaining, reset µs } instead. Refused: an array { remaining, reset µs,
--   retry-after µs }. (A table reply costs Redis ~0.7 µs; one integer, almost
--   nothing: the common case gets the integer.) A peek that would admit:
--   { remaining, reset µs } of the bucket as it stands (nothing was written).
-- Complexity: O(1) time and memory.
local bucket_key = KEYS[1] -- the bucket (its TAT)
local rate_key = KEYS[2] -- optional: its runtime rate (adaptive buckets), same hash slot
local cost = tonumber(ARGV[1]) -- tokens this request takes, 1..capacity
local capacity = tonumber(ARGV[2]) -- tokens the bucket holds
local interval_us = tonumber(ARGV[3]) -- whole µs to refill one token
local keep_us = tonumber(ARGV[4]) -- how long a runtime rate stays in force (0: not adaptive)
local debit = ARGV[5] == '1' -- '0': only read (peek)

local now = now_us()
local admitted, remaining, reset_us, retry_us, lapsed_key, debt =
  tb_eval(bucket_key, rate_key, capacity, interval_us, keep_us, cost, now)
if admitted then
  if not debit then return { remaining + cost, debt } end
  tb_write(bucket_key, reset_us, now, lapsed_key)
  if rate_key then return { remaining, reset_us } end
  return reset_us
end
return { remaining, reset_us, retry_us }
