-- Failure backoff: a growing wait after failed attempts.
-- State: a hash { n = failures, t = µs of the last failure }; failures are
-- forgotten `memory_us` after the last one. Two ways to count:
-- - recorded after the fact (record_failure.lua): a check only reads;
-- - counted (`counts` = 1): an admitted, debited check counts its attempt as a
--   failure at once, in the same script that read the wait, so concurrent
--   attempts queue behind each other's pending failures; the caller clears
--   them on success (DEL) and does nothing more on a failure.
-- The wait after n failures is 0 while n <= free, then
-- base * 2^(n - free - 1), capped at max_us.
-- Complexity: O(1) time and memory.

local function bo_delay_us(failures, base_us, max_us, free)
  if failures <= free then return 0 end
  return math.min(max_us, base_us * 2 ^ (failures - free - 1))
end

-- Failures still remembered at `now`, and the time of the last one.
local function bo_read(key, memory_us, now)
  local v = redis.call('HMGET', key, 'n', 't')
  local failures = tonumber(v[1]) or 0
  local last = tonumber(v[2]) or 0
  if now - last >= memory_us then failures = 0 end
  return failures, last
end

local function bo_eval(key, base_us, max_us, free, memory_us, now)
  local failures, last = bo_read(key, memory_us, now)
  local wait = last + bo_delay_us(failures, base_us, max_us, free) - now
  if wait > 0 then
    local retry_us = math.ceil(wait)
    return { key = key, limit = 1, allowed = false, remaining = 0, retry_us = retry_us, reset_us = retry_us }
  end
  return { key = key, limit = 1, allowed = true, remaining = 1, retry_us = 0, reset_us = 0, failures = failures }
end

-- As a strategy of lua/check.lua (see its header). Recorded after the fact, a
-- check only reads, so nothing is applied and an unwritten admission reads the
-- same. Counted, an admission writes its pending failure (bo_apply).
-- Record fields: base µs, max µs, free failures, memory µs, counts (1|0).
local function bo_check(key, _value, _cost, now, base_us, max_us, free, memory_us, counts)
  local r = bo_eval(key, tonumber(base_us), tonumber(max_us), tonumber(free), tonumber(memory_us), now)
  if r.allowed and counts == '1' then r.memory_us = tonumber(memory_us) end
  return r
end

-- A counted admission: its attempt is a failure until the caller clears it.
local function bo_apply(r, now)
  if not r.memory_us then return end
  redis.call('HSET', r.key, 'n', r.failures + 1, 't', string.format('%d', now))
  redis.call('PEXPIRE', r.key, (key_ttl_extra_ms + math.ceil(r.memory_us / 1000)))
end

local function bo_unwritten(_r) end
