-- Clock: the Redis server's own time, in microseconds.
-- Every Lambda asks the same server, so skewed container clocks cannot disagree
-- about a window. Production scripts are assembled with this fragment only; a
-- test-only fragment (test/support/pinned_clock.lua) replaces it to pin time.
-- now_us(): integer microseconds since the epoch. O(1) time and memory.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- key_ttl_ms(ms): the expiry to give a key that carries information for `ms`
-- more. Decisions never depend on expiry (stale state is recognised from its
-- times); expiry only frees memory, so the pinned test clock can lengthen it.
local function key_ttl_ms(ms)
  return ms
end

-- arg_count: how many ARGV the caller sent, for a script whose arguments come
-- in more than one form (the pinned test clock's time, its last, not counted).
local arg_count = #ARGV
