-- release: gives back one lease of an in-flight limit (lib/concurrency), at
-- once, so the next acquire need not wait for its TTL. Idempotent: releasing
-- a lease that was released already, or has lapsed, changes nothing.
-- fragments: lib/concurrency
-- Reply: 1 when the lease was held until now, 0 otherwise.
-- Complexity: O(log n). ZREM is not deny-OOM: a release works at maxmemory.
local leases_key = KEYS[1] -- the in-flight limit's leases: id -> µs its lease lapses
local lease = ARGV[1] -- the lease id the acquire answered

return cc_release(leases_key, lease, clock_us)
