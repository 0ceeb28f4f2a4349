-- In-flight (concurrency) limit: at most `limit` leases held at once per key.
-- State: a sorted set, lease id -> µs its lease expires. A lease is released
-- by its holder (lua/release.lua), or lapses at its expiry: a holder that
-- crashed (a Lambda killed at its timeout) never keeps a slot past its TTL.
-- Lapsed leases are reclaimed lazily by the next admission. A check that
-- names a lease already held (a retried acquire) holds it once.
-- Complexity: O(log n + n) per check, n the live leases (at most `limit`).

-- As a strategy of lua/check.lua (see its header): check, apply, unwritten.
-- Record fields: limit, lease TTL µs, lease id.
local function cc_check(key, _value, cost, now, limit, ttl_us, lease)
  limit, ttl_us = tonumber(limit), tonumber(ttl_us)
  local live = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
  local held = #live / 2
  local allowed, remaining, retry_us, reset_us, again = true, limit - held - cost, 0, ttl_us, false
  local mine = redis.call('ZSCORE', key, lease)
  if mine and tonumber(mine) > now then
    -- a retried acquire: the slot is this lease's already
    remaining, again = limit - held, true
  elseif held + cost > limit then
    -- truthful: the earliest live lease lapses then at the latest (a release may free one sooner)
    allowed, remaining = false, limit - held
    retry_us = tonumber(live[2]) - now
    reset_us = tonumber(live[#live]) - now
  end
  -- one constructor: the table is sized once (adding fields later rehashes it)
  return {
    key = key,
    cost = cost,
    limit = limit,
    held = held,
    lease = lease,
    ttl_us = ttl_us,
    again = again,
    allowed = allowed,
    remaining = remaining,
    retry_us = retry_us,
    reset_us = reset_us,
  }
end

local function cc_apply(r, now)
  if r.again then return end
  -- the ZADD first: it is deny-OOM, so at maxmemory the admission is refused before anything is written
  -- (Redis refuses no write of a script after its first, and ZREMRANGEBYSCORE is not deny-OOM)
  redis.call('ZADD', r.key, string.format('%d', now + r.ttl_us), r.lease)
  redis.call('ZREMRANGEBYSCORE', r.key, '-inf', string.format('%d', now))
  -- every lease has the same TTL: the set lives as long as the one just taken
  redis.call('PEXPIRE', r.key, (key_ttl_extra_ms + math.max(1, math.ceil(r.ttl_us / 1000))))
end

local function cc_unwritten(r)
  r.remaining = r.limit - r.held
  if r.held == 0 then r.reset_us = 0 end
end

-- Gives back one lease (lua/release.lua, lua/settle_in_flight.lua): 1 when it
-- was held until now, 0 otherwise (released already, or lapsed). Writes only
-- a ZREM, which is not deny-OOM: a release works at maxmemory.
local function cc_release(key, lease, now)
  local expires = redis.call('ZSCORE', key, lease)
  redis.call('ZREM', key, lease)
  if expires and tonumber(expires) > now then return 1 end
  return 0
end
