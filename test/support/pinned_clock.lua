-- Test-only clock (never part of the layer): the script's time is its last
-- ARGV, so tests and the reference model agree on every microsecond. Keys live
-- an extra hour, so Redis' real-time expiry never races the pinned time.
-- The same names as lua/lib/clock.lua's.
local clock_us = tonumber(ARGV[#ARGV])

local key_ttl_extra_ms = 3600000

local arg_count = #ARGV - 1
