-- regions_give: this region's rebalancer gives unused share of one `shares`
-- limit to the regions that report demand (a `refused` it has not answered
-- yet). It gives only share unused in the current window (share less the
-- events in it), and only what the receiver gave it (raising the monotone
-- `back:<region>`) or its own initial split (raising `to:<region>`), never
-- share a third region gave (it lives only as long as that giver's record).
-- It lowers its own share in the same step it raises the counter the
-- receiver will see: a grant in flight is share nobody holds, so the shares
-- never sum above the limit. Several regions asking at once share what is
-- unused in proportion to their demand.
-- fragments: lib/sliding_window lib/regions
-- KEYS[1]        this region's ring
-- KEYS[2..1+R]   the grants hash of every region (ARGV's region order)
-- ARGV[1]        this region's index (1-based) among the R names
-- ARGV[2]        R, then R region names
-- ARGV[3+R..]    limit, window µs, this region's initial share
-- Reply: { share before, events in the window, share given now }
-- Complexity: O(R) reads and writes, O(log limit) for the window.
local me = tonumber(ARGV[1])
local regions = tonumber(ARGV[2])
local names, grants = {}, {}
for s = 1, regions do
  names[s] = ARGV[2 + s]
  grants[s] = KEYS[1 + s]
end
local limit = tonumber(ARGV[3 + regions])
local window_us = tonumber(ARGV[4 + regions])
local base = tonumber(ARGV[5 + regions])

local now = clock_us
local share = rg_share(grants, names, me, base, limit, now, window_us)
local in_window = rg_in_window(KEYS[1], limit, window_us, now)
local unused = share - in_window
-- a gift is what it gives back of the receiver's own gifts, then out of its own split: never share a third gave
local own_left = rg_own_left(grants, names, me, base)
-- what each region asks for (refusals not answered yet); the unused share is split in proportion to it,
-- so with three regions or more the first listed does not take it all while the others' demand is marked answered
local demand, asked = {}, 0
for s = 1, regions do
  if s ~= me then
    local theirs = redis.call('HMGET', grants[s], 'refused', 'born')
    local refused = tonumber(theirs[1]) or 0
    local answered = redis.call('HMGET', grants[me], 'seen:' .. names[s], 'seen-born:' .. names[s])
    -- what was answered of a record since expired and begun again is no part of its new count
    local seen = (answered[2] or '') == (theirs[2] or '') and (tonumber(answered[1]) or 0) or 0
    if refused > seen then
      demand[s] = { refused = refused, born = theirs[2], wants = refused - seen }
      asked = asked + refused - seen
    end
  end
end
local pool = math.max(0, math.min(unused, asked))
local offer, offered = {}, 0
for s, d in pairs(demand) do
  offer[s] = math.min(d.wants, math.floor(pool * d.wants / asked))
  offered = offered + offer[s]
end
-- the units the rounding left, one each, from a start that moves with the clock (no region always first)
local start = now % regions
for i = 0, regions - 1 do
  local s = (start + i) % regions + 1
  if offered < pool and demand[s] and offer[s] < demand[s].wants then
    offer[s] = offer[s] + 1
    offered = offered + 1
  end
end
local function raise(field, by)
  redis.call('HSET', grants[me], field, (tonumber(redis.call('HGET', grants[me], field)) or 0) + by)
end
local given, got = 0, {}
-- gives region s up to `amount`: back what it gave this region first, then out of this region's own split
local function give(s, amount)
  local gift = math.max(0, math.min(unused - given, amount))
  local returned = math.max(0, math.min(gift, rg_returnable(grants, names, me, s, now, window_us)))
  local own = math.max(0, math.min(gift - returned, own_left))
  if returned > 0 then raise('back:' .. names[s], returned) end
  if own > 0 then
    raise('to:' .. names[s], own)
    own_left = own_left - own
  end
  got[s] = (got[s] or 0) + returned + own
  given = given + returned + own
end
for s = 1, regions do
  if demand[s] then give(s, offer[s]) end
end
-- what a region could not take (nothing of its own to give back, the split spent) goes to the others still asking
for i = 0, regions - 1 do
  local s = (start + i) % regions + 1
  if demand[s] and got[s] < demand[s].wants then give(s, demand[s].wants - got[s]) end
end
for s = 1, regions do
  if demand[s] then
    -- demand answered (or not answerable now): only new refusals ask again
    redis.call('HSET', grants[me], 'seen:' .. names[s], demand[s].refused)
    -- a record without `born` (written before it was kept) is answered as one: no stale mark compared against it
    if demand[s].born then
      redis.call('HSET', grants[me], 'seen-born:' .. names[s], demand[s].born)
    else
      redis.call('HDEL', grants[me], 'seen-born:' .. names[s])
    end
    rg_touch(grants[me], now, window_us)
  end
end
return { share, in_window, given }
