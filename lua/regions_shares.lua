-- regions_shares: limits in `shares` mode, decided in this region alone,
-- all-or-nothing. A limit admits when this region's events in its window plus
-- the cost fit in its share (lib/regions rg_share); a refusal with debit adds
-- the cost to `refused` (the demand the rebalancers answer) of each limit that
-- did not fit, not of the others: they need no share.
-- fragments: lib/sliding_window lib/regions
-- KEYS         per limit i, 1 + R keys: this region's ring, then the grants
--              hash of every region (ARGV's region order)
-- ARGV[1]      N, the number of limits (1..16)
-- ARGV[2]      '1' to debit when admitted (and record a refusal), '0' to only read
-- ARGV[3]      this region's index (1-based) among the R names
-- ARGV[4]      R, then R region names
-- ARGV[5+R..]  per limit: cost, limit, window µs, this region's initial share
-- Reply: { allowed (1|0), binding limit (1-based, 0 when admitted), now µs,
--   then per limit: remaining, retry µs (0: it fits; -1: only a grant can
--   admit it), reset µs, share }
-- Complexity: O(N × (R + cost)) amortised; memory O(limit) per ring.
local limits = tonumber(ARGV[1])
local debit = ARGV[2] == '1'
local me = tonumber(ARGV[3])
local regions = tonumber(ARGV[4])
local names = {}
for s = 1, regions do names[s] = ARGV[4 + s] end

local now = clock_us
local evals, own_grants, short = {}, {}, {}
local allowed, binding, longest = true, 0, -1
local reply = { 0, 0, now }
for i = 1, limits do
  local at = 4 + regions + 4 * (i - 1)
  local cost, limit, window_us, base = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  local k = (1 + regions) * (i - 1)
  local grants = {}
  for s = 1, regions do grants[s] = KEYS[k + 1 + s] end
  local share = rg_share(grants, names, me, base, limit, now, window_us)
  -- the ring holds up to `limit` events: a region's events never exceed its share
  local r = sw_eval(KEYS[k + 1], limit, window_us, cost, now)
  local in_window = r.n - r.e
  local remaining, retry_us = share - in_window - cost, 0
  if in_window + cost > share then
    remaining = math.max(0, share - in_window)
    retry_us = (share >= cost) and rg_leaves_in(r, in_window + cost - share) or -1
    local wait = retry_us == -1 and math.huge or retry_us
    if wait > longest then binding, longest = i, wait end
    allowed = false
    short[i] = true
  end
  evals[i], own_grants[i] = r, grants[me]
  local reset_us = in_window > 0 and r.newest + window_us - r.now or 0
  reply[#reply + 1] = remaining
  reply[#reply + 1] = retry_us
  reply[#reply + 1] = reset_us
  reply[#reply + 1] = share
end
if debit then
  for i = 1, limits do
    local r = evals[i]
    if allowed then
      sw_apply(r)
    elseif short[i] then
      local refused = tonumber(redis.call('HGET', own_grants[i], 'refused')) or 0
      redis.call('HSET', own_grants[i], 'refused', refused + r.cost)
      rg_touch(own_grants[i], now, r.window_us)
    end
  end
end
reply[1] = allowed and 1 or 0
reply[2] = binding
return reply
