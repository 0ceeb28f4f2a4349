-- Regions: what the multi-region modes (lua/regions_*.lua) share. A limit's
-- state in each region is that region's own keys, written only by it and
-- replicated whole to the others (one writer per key, so last-writer-wins
-- never loses a write): its ring of admission times (lib/sliding_window) and
-- its grants hash, with fields
--   to:<region>  share of its own split given to that region, in total (monotone)
--   back:<region> share given back to that region of what it gave, in total (monotone)
--   refused      cost refused here, in total (monotone): the demand it reports
--   seen:<region> the other region's `refused` this region has answered
--   seen-born:<region> that region's `born` when it was answered
--   born         µs (its writer's clock) of the hash's first write: a hash
--                expired and begun again counts `refused` from 0, so its
--                demand is answered afresh, not against the old `seen:`
--   until        µs (its writer's clock) before which the hash is kept: every
--                write moves it to 4 windows on, and the key expires then
-- A region counts another's gift only while that hash will outlive, by a
-- window and a clock margin, every event the gift admits here: when the
-- giver's hash expires (its share back to its initial split), the events its
-- gifts let in elsewhere have left their windows.
-- Complexity: O(regions) reads.

local RG_CLOCK_MARGIN_US = 1000000 -- regions' clocks agree to better than 1 s

-- Keeps this region's grants hash 4 windows more (every write calls it).
local function rg_touch(grants, now, window_us)
  local keep_us = 4 * window_us + RG_CLOCK_MARGIN_US
  if redis.call('HEXISTS', grants, 'born') == 0 then
    redis.call('HSET', grants, 'born', now, 'until', now + keep_us)
  else
    redis.call('HSET', grants, 'until', now + keep_us)
  end
  redis.call('PEXPIRE', grants, (key_ttl_extra_ms + math.ceil(keep_us / 1000)))
end

-- This region's share of one limit, as its own store sees it: its initial
-- split, less what it gave, plus what it has seen given to it. Its own gifts
-- are always current here and another's arrive late, so each region's view is
-- at most its true share, and the views sum to at most the limit. A return
-- (another's `back:<me>`) counts only up to what this region's own record
-- still says it gave that region: its record expired (its split back whole),
-- the return of a gift no record holds is no share (the returner still
-- subtracts it, but a share below zero takes no admission from anyone).
-- Never above the limit itself (a limit lowered while gifts are out): the
-- ring holds `limit` events, and a share above it would let a check
-- overwrite events still in the window.
--   grants   the grants hashes of every region, in `names` order
--   me       this region's index in `names`
local function rg_share(grants, names, me, base, limit, now, window_us)
  local share = base
  for s = 1, #names do
    if s ~= me then
      local mine = redis.call('HMGET', grants[me], 'to:' .. names[s], 'back:' .. names[s])
      local gave = tonumber(mine[1]) or 0
      share = share - gave - (tonumber(mine[2]) or 0)
      local theirs = redis.call('HMGET', grants[s], 'to:' .. names[me], 'back:' .. names[me], 'until')
      if (tonumber(theirs[3]) or 0) > now + window_us + RG_CLOCK_MARGIN_US then
        share = share + (tonumber(theirs[1]) or 0) + math.min(tonumber(theirs[2]) or 0, gave)
      end
    end
  end
  return math.min(share, limit)
end

-- What this region may give back to region `s` of what `s` gave it: `s`'s
-- `to:<me>` as long as it counts here, less what was given back already
-- (`back:<s>`). Given back, it is counted by `s` only while this record
-- lives, and only up to the gift `s`'s own record still holds (rg_share): if
-- that record expires first, `s` has its split back and no return.
local function rg_returnable(grants, names, me, s, now, window_us)
  local theirs = redis.call('HMGET', grants[s], 'to:' .. names[me], 'until')
  if (tonumber(theirs[2]) or 0) <= now + window_us + RG_CLOCK_MARGIN_US then return 0 end
  local back = tonumber(redis.call('HGET', grants[me], 'back:' .. names[s])) or 0
  return math.max(0, (tonumber(theirs[1]) or 0) - back)
end

-- What is left of this region's own initial split (its base less all it has
-- given of it): the most it may still give a region beyond a return. Share
-- received is never passed on to a third region, or a gift could outlive the
-- record of the region it came from (its giver's hash expiring gives that
-- region its split back while the share lives on elsewhere).
local function rg_own_left(grants, names, me, base)
  local left = base
  for s = 1, #names do
    if s ~= me then left = left - (tonumber(redis.call('HGET', grants[me], 'to:' .. names[s])) or 0) end
  end
  return left
end

-- Events in a ring's window now (0 for no key): read only.
local function rg_in_window(ring, limit, window_us, now)
  local r = sw_eval(ring, limit, window_us, 1, now)
  return r.n - r.e, r
end

-- µs until the `need` oldest events of a ring's window have left it.
local function rg_leaves_in(r, need)
  return sw_time_at(r.key, r.n, r.h, {}, r.e + need - 1) + r.window_us - r.now
end
