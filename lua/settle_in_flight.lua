-- settle_in_flight: the end of an in-flight call that has stopped, in one
-- round trip: its slot's lease given back (as lua/release.lua) and its
-- budget reservation settled (as lua/settle.lua). A call still running
-- settles alone (lua/settle.lua) and keeps its slot.
-- fragments: lib/concurrency lib/token_bucket lib/holds
--
-- KEYS[1]      the in-flight limit's leases (id -> µs its lease lapses)
-- KEYS[2..5]   the budget's keys: bucket, holds, amounts, settled. All five
--              in one hash slot: the two policies share a group.
-- ARGV[1]      the lease id the admission answered
-- ARGV[2]      the reservation's id
-- ARGV[3]      the call's actual cost, whole units (0: nothing was spent)
-- ARGV[4]      the budget's capacity, units
-- ARGV[5]      whole µs to refill one unit
-- ARGV[6]      how long lapsed holds and settled ids are remembered, µs
-- Reply: { outcome, remaining, reset µs, released }: lua/settle.lua's three
--   (1 settled, 2 late, 3 duplicate, 4 unknown), then 1 when the lease was
--   held until now, 0 otherwise (released already, or lapsed). Idempotent: a
--   second call answers duplicate (unknown once the settled id is
--   forgotten) and 0, and changes nothing.
-- Complexity: O(log n + k) (lib/holds) plus O(log limit) for the lease.
-- No `#!lua` shebang, deliberately (as lua/check.lua): Redis then refuses a
-- deny-OOM command at maxmemory only while the script has called no write
-- command yet (it never stops a script halfway through its writes). The
-- lease's ZREM is always the first write and is not deny-OOM, so at
-- maxmemory under noeviction the slot is given back AND the settle is
-- applied: its writes replace a hold (ZREM, HDEL) by a settled id (ZADD) and
-- rewrite the bucket's value, about as many bytes as they free, bounded per
-- call (lib/holds). lua/settle.lua alone (the still-running path) settles at
-- the estimate, which is what is held: the bucket's value does not change
-- and its first write is the hold's ZREM, so it too is applied at maxmemory;
-- a settle alone whose actual cost differs writes the bucket's SET first and
-- is refused there, its hold left charged (a later settle trues it up, 'late').
local leases_key = KEYS[1]
local budget_key, holds_key, amounts_key, settled_key = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lease = ARGV[1]
local id = ARGV[2]
local actual = tonumber(ARGV[3])
local capacity = tonumber(ARGV[4])
local interval_us = tonumber(ARGV[5])
local retention_us = tonumber(ARGV[6])

local now = clock_us
-- the lease first: not deny-OOM, and after a write Redis refuses none of this script's at maxmemory
local released = cc_release(leases_key, lease, now)
local outcome = holds_settle(budget_key, holds_key, amounts_key, settled_key, id, actual, interval_us, retention_us, now)
local remaining, reset_us = holds_standing(budget_key, capacity, interval_us, now)
return { outcome, remaining, reset_us, released }
