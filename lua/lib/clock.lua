-- Clock: the Redis server's own time, in microseconds.
-- Every Lambda asks the same server, so skewed container clocks cannot disagree
-- about a window. Production scripts are assembled with this fragment only; a
-- test-only fragment (test/support/pinned_clock.lua) replaces it to pin time.
-- Values, not functions: Redis builds every function a script defines again
-- on each call (~0.15 µs apiece), and a check's flat path reads the clock
-- and sets an expiry on every call. The assembler drops what a script does
-- not reach, TIME read included (layer/src/lua/assembly.ts).
-- O(1) time and memory.

-- clock_us: integer microseconds since the epoch, read once when the script
-- starts (a script runs whole, so one reading serves all of it).
local clock_time = redis.call('TIME')
local clock_us = tonumber(clock_time[1]) * 1000000 + tonumber(clock_time[2])

-- key_ttl_extra_ms: what a key's expiry gets beyond the ms it carries
-- information for (`PX key_ttl_extra_ms + ms`). Decisions never depend on
-- expiry (stale state is recognised from its times); expiry only frees
-- memory, so the pinned test clock can lengthen it.
local key_ttl_extra_ms = 0

-- arg_count: how many ARGV the caller sent, for a script whose arguments come
-- in more than one form (the pinned test clock's time, its last, not counted).
local arg_count = #ARGV
