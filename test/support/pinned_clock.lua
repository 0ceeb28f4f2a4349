-- Test-only clock (never part of the layer): the script's time is its last
-- ARGV, so tests and the reference model agree on every microsecond. Keys live
-- an extra hour, so Redis' real-time expiry never races the pinned time.
local function now_us()
  return tonumber(ARGV[#ARGV])
end

local function key_ttl_ms(ms)
  return ms + 3600000
end

local arg_count = #ARGV - 1
