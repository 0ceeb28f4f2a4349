-- regions_approximate: limits in `approximate` mode, decided in this region
-- alone against the events of every region's window: its own ring, and the
-- other regions' rings as replication last brought them (each written only by
-- its region). What the others admitted within the last replication lag is
-- not seen yet: over-admission up to (regions - 1) × their rate × the lag.
-- All-or-nothing over the limits.
-- fragments: lib/sliding_window lib/regions
-- KEYS         per limit i, R keys: the ring of every region (ARGV's order)
-- ARGV[1]      N, the number of limits (1..16)
-- ARGV[2]      '1' to debit when admitted, '0' to only read
-- ARGV[3]      this region's index (1-based), ARGV[4] R
-- ARGV[5..]    per limit: cost, limit, window µs
-- Reply: { allowed (1|0), binding limit (1-based, 0 when admitted), now µs,
--   then per limit: remaining, retry µs, reset µs, the other regions' events }
-- Complexity: O(N × R × log limit + cost) per check; memory O(limit) per ring.
local limits = tonumber(ARGV[1])
local debit = ARGV[2] == '1'
local me = tonumber(ARGV[3])
local regions = tonumber(ARGV[4])

local now = clock_us
local evals = {}
local allowed, binding, longest = true, 0, -1
local reply = { 0, 0, now }
for i = 1, limits do
  local at = 4 + 3 * (i - 1)
  local cost, limit, window_us = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local k = regions * (i - 1)
  local others, soonest = 0, nil
  for s = 1, regions do
    if s ~= me then
      local n, theirs = rg_in_window(KEYS[k + s], limit, window_us, now)
      others = others + n
      if n > 0 then
        local leaves = rg_leaves_in(theirs, 1)
        if soonest == nil or leaves < soonest then soonest = leaves end
      end
    end
  end
  local r = sw_eval(KEYS[k + me], limit, window_us, cost, now)
  local own = r.n - r.e
  local remaining, retry_us = limit - own - others - cost, 0
  if own + others + cost > limit then
    remaining = math.max(0, limit - own - others)
    local need = own + others + cost - limit
    -- when this region's own events can free the room: the time they have
    -- (an upper bound: the others' events leaving sooner may free it first);
    -- else the earliest time any event leaves (a retry before it surely fails)
    retry_us = need <= own and rg_leaves_in(r, need) or math.min(soonest or window_us, own > 0 and rg_leaves_in(r, 1) or window_us)
    if retry_us > longest then binding, longest = i, retry_us end
    allowed = false
  end
  evals[i] = r
  reply[#reply + 1] = remaining
  reply[#reply + 1] = retry_us
  reply[#reply + 1] = own > 0 and r.newest + window_us - r.now or 0
  reply[#reply + 1] = others
end
if debit and allowed then
  for i = 1, limits do sw_apply(evals[i]) end
end
reply[1] = allowed and 1 or 0
reply[2] = binding
return reply
