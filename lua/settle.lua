-- settle: applies a call's actual cost to the budget it reserved from.
-- fragments: lib/token_bucket lib/holds
-- Reply: { outcome, remaining, reset µs }, outcome:
--   1 settled: the hold is replaced by the actual cost (refund or extra debit);
--   2 late: the hold had lapsed (and stayed charged); it is replaced by the
--     actual cost now, the same way;
--   3 duplicate: this id was settled already, nothing changes;
--   4 unknown: no hold and no memory of this id, nothing changes.
-- The balance may go past empty (remaining < 0): later reservations wait
-- until it is paid back. Complexity: O(log n + k) time (see lib/holds).
local budget_key = KEYS[1]
local holds_key = KEYS[2]
local amounts_key = KEYS[3]
local settled_key = KEYS[4]
local id = ARGV[1] -- the reservation's id
local actual = tonumber(ARGV[2]) -- the call's actual cost, whole units (0: nothing was spent)
local capacity = tonumber(ARGV[3])
local interval_us = tonumber(ARGV[4])
local retention_us = tonumber(ARGV[5])

local now = clock_us
local outcome = holds_settle(budget_key, holds_key, amounts_key, settled_key, id, actual, interval_us, retention_us, now)
local remaining, reset_us = holds_standing(budget_key, capacity, interval_us, now)
return { outcome, remaining, reset_us }
