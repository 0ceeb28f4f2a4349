-- reserve: holds an estimated cost against a cost budget before a call whose
-- true cost is known only after it (an LLM request), all or nothing. The
-- estimate is charged at once; a settle trues it up; a hold that lapses
-- unsettled stays charged (see lib/holds).
-- fragments: lib/token_bucket lib/holds
-- Reply: admitted { 1, remaining, reset µs } (the hold is taken, or was
--   already: a retried reserve with the same id debits once); refused
--   { 0, remaining, reset µs, retry-after µs }; an id already settled or
--   whose hold lapsed: { 2, remaining, reset µs } and nothing more is held.
-- Complexity: O(log n + k) time (see lib/holds); the first write is SET or ZADD, or holds_forget's
-- SETRANGE gate (deny-OOM): at maxmemory a reservation takes nothing.
local budget_key = KEYS[1] -- the budget: a token bucket of cost units (its TAT)
local holds_key = KEYS[2] -- reservation id -> µs its hold lapses
local amounts_key = KEYS[3] -- reservation id -> what its hold charged
local settled_key = KEYS[4] -- reservation id -> µs it was settled
local id = ARGV[1] -- the reservation's id (unique per call)
local units = tonumber(ARGV[2]) -- the estimate, whole cost units, 1..capacity
local capacity = tonumber(ARGV[3]) -- the budget's capacity, units
local interval_us = tonumber(ARGV[4]) -- whole µs to refill one unit
local hold_us = tonumber(ARGV[5]) -- how long the hold lasts unsettled
local retention_us = tonumber(ARGV[6]) -- how long lapsed holds and settled ids are remembered

local now = clock_us
-- the budget's bucket gates the housekeeping at maxmemory: a reservation fails whole there (lib/holds)
holds_forget(holds_key, amounts_key, settled_key, retention_us, now, budget_key)
local lapses = tonumber(redis.call('ZSCORE', holds_key, id))
if lapses or redis.call('ZSCORE', settled_key, id) then
  local remaining, reset_us = holds_standing(budget_key, capacity, interval_us, now)
  return { (lapses and lapses > now) and 1 or 2, remaining, reset_us }
end
local admitted, remaining, reset_us, retry_us = tb_eval(tb_stored(budget_key), nil, capacity, interval_us, 0, units, now)
if not admitted then return { 0, remaining, reset_us, retry_us } end
tb_write(budget_key, reset_us, now, nil)
redis.call('ZADD', holds_key, now + hold_us, id)
redis.call('HSET', amounts_key, id, holds_amount(units, interval_us))
holds_keep({ holds_key, amounts_key, settled_key }, math.ceil((hold_us + retention_us) / 1000))
return { 1, remaining, reset_us }
