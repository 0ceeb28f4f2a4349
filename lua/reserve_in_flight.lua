-- reserve_in_flight: an in-flight slot (lib/concurrency) and a cost budget's
-- reservation (lib/holds) taken together, all or nothing: both are taken, or
-- neither (nothing is written but the housekeeping of lapsed ids). One round
-- trip for an LLM call's admission, and no moment at which a caller holds
-- one without the other (a holder dying between two scripts kept its slot).
-- fragments: lib/concurrency lib/token_bucket lib/holds
--
-- KEYS[1]      the in-flight limit's leases (id -> µs its lease lapses)
-- KEYS[2..5]   the budget's keys: bucket, holds, amounts, settled. All five
--              in one hash slot: the two policies share a group.
-- ARGV[1]      the lease id
-- ARGV[2]      the in-flight limit
-- ARGV[3]      the lease TTL µs
-- ARGV[4]      the reservation id (unique per call)
-- ARGV[5]      the estimate, whole cost units, 1..capacity
-- ARGV[6]      the budget's capacity, units
-- ARGV[7]      whole µs to refill one unit
-- ARGV[8]      how long the hold lasts unsettled, µs
-- ARGV[9]      how long lapsed holds and settled ids are remembered, µs
-- Reply: lua/check.lua's layout for two limits (1: the slot, 2: the budget):
--   allowed (1|0), binding limit (0 when admitted), retry-after µs, then per
--   limit remaining, reset µs, retry-after µs; allowed 2: the reservation id
--   was settled already or its hold lapsed, and nothing was taken.
--   A retried call whose hold is live holds it once (and its slot once).
-- Complexity: O(log n + k) (lib/holds) plus O(limit) (lib/concurrency).
local leases_key = KEYS[1]
local budget_key, holds_key, amounts_key, settled_key = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lease = ARGV[1]
local in_flight_limit = ARGV[2]
local lease_ttl_us = ARGV[3]
local id = ARGV[4]
local units = tonumber(ARGV[5])
local capacity = tonumber(ARGV[6])
local interval_us = tonumber(ARGV[7])
local hold_us = tonumber(ARGV[8])
local retention_us = tonumber(ARGV[9])

local now = clock_us
-- the budget's bucket (a string) gates the housekeeping at maxmemory: an admission fails whole there
holds_forget(holds_key, amounts_key, settled_key, retention_us, now, budget_key)
local slot = cc_check(leases_key, nil, 1, now, in_flight_limit, lease_ttl_us, lease)
local lapses = tonumber(redis.call('ZSCORE', holds_key, id))
local held = lapses and lapses > now
if not held and (lapses or redis.call('ZSCORE', settled_key, id)) then
  cc_unwritten(slot)
  local remaining, reset_us = holds_standing(budget_key, capacity, interval_us, now)
  return { 2, 0, 0, slot.remaining, slot.reset_us, slot.retry_us, remaining, reset_us, 0 }
end
local admitted, remaining, reset_us, retry_us = true, 0, 0, 0
if held then
  remaining, reset_us = holds_standing(budget_key, capacity, interval_us, now)
else
  admitted, remaining, reset_us, retry_us = tb_eval(tb_stored(budget_key), nil, capacity, interval_us, 0, units, now)
end

if not (slot.allowed and admitted) then
  if slot.allowed then cc_unwritten(slot) end
  if admitted then remaining, reset_us = holds_standing(budget_key, capacity, interval_us, now) end
  -- the binding limit: the longer wait (the slot when both refuse as long)
  local binding, retry = 1, slot.retry_us
  if not admitted and (slot.allowed or retry_us > slot.retry_us) then binding, retry = 2, retry_us end
  return { 0, binding, retry, slot.remaining, slot.reset_us, slot.retry_us, remaining, reset_us, retry_us }
end

-- both admit: the slot, then the hold. The slot's ZADD is deny-OOM and the first write (or holds_forget's
-- gate above was, when it forgot lapsed ids), so at maxmemory neither is taken
cc_apply(slot, now)
if not held then
  tb_write(budget_key, reset_us, now, nil)
  redis.call('ZADD', holds_key, now + hold_us, id)
  redis.call('HSET', amounts_key, id, holds_amount(units, interval_us))
  holds_keep({ holds_key, amounts_key, settled_key }, math.ceil((hold_us + retention_us) / 1000))
end
return { 1, 0, 0, slot.remaining, slot.reset_us, slot.retry_us, remaining, reset_us, 0 }
