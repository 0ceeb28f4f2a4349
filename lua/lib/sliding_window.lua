-- Exact sliding window as a ring of admission times in one string.
-- Layout (big-endian; the header is read with GETRANGE and written with
-- SETRANGE as one packed struct, slots likewise, or several at once with
-- BITFIELD_RO: string commands parse far less than BITFIELD's subcommands):
--   bits   0..31  n    stored events (the ring's size in slots)
--   bits  32..63  h    index of the oldest stored event
--   bits  64..95  e    stored events, from h on, known to have left the window
--   bits  96..127 w    the window (ms) e was last computed with, plus 2^31 once
--                      the key's expiry follows the epochs below (a key written
--                      before has it clear: its next admission sets the expiry)
--   bits 128..191 f    time (µs) of the event at position e: the oldest one
--                      not known to have left, so a denial in steady traffic
--                      needs no read past the header
--   bits 192..255 t    time (µs) of the newest event
--   bits 256..    n slots, i64 µs admission time of one event (cost c = c slots)
-- Times in the ring never decrease from h around to h-1, so the events still in
-- the window are a suffix of it; `e` remembers where that suffix starts, and a
-- check only looks at the few slots past it: O(1) amortised per event, with a
-- k-ary search (O(log n) reads) after a long idle gap. Denied requests write
-- nothing. Memory: 32 + 8 * limit bytes at most per key; the ring grows by
-- appending until it holds `limit` events (then it is copied once into an
-- exactly sized string), then overwrites the oldest.
--
-- A changed window (the policy edited) applies from the change on: an event
-- counts until a write sees it leave the window then in force (the write
-- moves `e` past it, or drops it); a later, longer window does not count it
-- again. So a shortened window takes effect at once, and a lengthened one
-- counts every event that was still inside the old window at the last admit;
-- for up to one new window after lengthening, events that had already left
-- the old window are not counted. A key expires between one and two windows
-- after its newest event: at the end of the window-long epoch after the one
-- its newest event falls in (epochs: whole windows since 1970), so the expiry
-- is rewritten once per window, not on every admission.
--
--   key        the window
--   limit      events allowed in any window
--   window_us  the window length in µs (a whole number of ms)
--   cost       events this request adds, 1..min(limit, 1024): one admit
--              writes at most 8 KiB of slots past maxmemory (see policy.ts)
-- Complexity: O(cost + log n) time worst case, O(cost) amortised.

local SW_HEADER = '>I4I4I4I4i8i8' -- n, h, e, w, f, t
local SW_HEADER_BYTES = 32
local SW_EPOCH_EXPIRY = 2147483648 -- w's flag bit; a window is at most a week, 6.048e8 ms < 2^31

-- The expiry (ms) of a window written at `now`: the end of the next epoch,
-- more than one window away. An admission in the epoch of the newest event,
-- with the same window, leaves the expiry as it is (see sw_apply).
local function sw_ttl_ms(now, window_us)
  return (key_ttl_extra_ms + math.ceil(((math.floor(now / window_us) + 2) * window_us - now) / 1000))
end

-- Reads the slots at the given ring indexes: one GETRANGE for a single slot,
-- one BITFIELD_RO for several.
local function sw_read(key, indexes)
  if #indexes == 1 then
    local at = SW_HEADER_BYTES + 8 * indexes[1]
    return { (struct.unpack('>i8', redis.call('GETRANGE', key, at, at + 7))) }
  end
  local args = { key }
  for _, i in ipairs(indexes) do
    args[#args + 1] = 'GET'
    args[#args + 1] = 'i64'
    args[#args + 1] = 8 * (SW_HEADER_BYTES + 8 * i)
  end
  return redis.call('BITFIELD_RO', unpack(args))
end

-- The raw bytes of `count` slots from ring index `from` on, wrapping at `n`:
-- at most two GETRANGEs, whatever the count (Lua's unpack limit never applies).
local function sw_slot_bytes(key, from, count, n)
  local first_run = math.min(count, n - from)
  local bytes = redis.call('GETRANGE', key, SW_HEADER_BYTES + 8 * from, SW_HEADER_BYTES + 8 * (from + first_run) - 1)
  if first_run < count then
    bytes = bytes .. redis.call('GETRANGE', key, SW_HEADER_BYTES, SW_HEADER_BYTES + 8 * (count - first_run) - 1)
  end
  return bytes
end

-- Time of the event at relative position p (0 = oldest stored), read once.
local function sw_time_at(key, n, h, times, p)
  local t = times[p]
  if t == nil then
    t = sw_read(key, { (h + p) % n })[1]
    times[p] = t
  end
  return t
end

-- First relative position >= e whose event is still in the window. The newest
-- event (position n-1) must be in it. Cached near probes settle steady traffic
-- without a read; otherwise a k-ary search reads 8 slots per call.
local function sw_first_in_window(key, n, h, e, times, now, window_us)
  -- invariant: the answer is in [lo, hi] and position hi is in the window
  local lo, hi, probed = e, n - 1, false
  while lo < hi do
    local t = times[lo]
    if t ~= nil then
      if now - t >= window_us then lo = lo + 1 else hi = lo end
    elseif not probed then
      -- steady traffic: the event at lo, or one of the next few, is in the
      -- window; one GETRANGE reads up to 4 slots (to the ring's end)
      probed = true
      local at = (h + lo) % n
      local run = math.min(4, hi - lo, n - at)
      local bytes = redis.call('GETRANGE', key, SW_HEADER_BYTES + 8 * at, SW_HEADER_BYTES + 8 * (at + run) - 1)
      for j = 0, run - 1 do
        times[lo + j] = (struct.unpack('>i8', bytes, 8 * j + 1))
      end
    else
      local step = math.max(1, math.floor((hi - lo) / 8))
      local probe, pos = {}, {}
      for p = lo, math.min(hi - 1, lo + 7 * step), step do
        probe[#probe + 1] = (h + p) % n
        pos[#pos + 1] = p
      end
      local got = sw_read(key, probe)
      for j = 1, #pos do
        times[pos[j]] = got[j]
        if now - got[j] < window_us then
          hi = pos[j]
          break
        end
        lo = pos[j] + 1
      end
    end
  end
  return lo
end

local function sw_eval(key, limit, window_us, cost, now)
  local n, h, e, w, first, newest = 0, 0, 0, 0, 0, 0 -- w: the window (ms) of the last admission
  local header = redis.call('GETRANGE', key, 0, SW_HEADER_BYTES - 1)
  if #header == SW_HEADER_BYTES then n, h, e, w, first, newest = struct.unpack(SW_HEADER, header) end
  local window_ms = window_us / 1000
  local times = {} -- relative position (0 = oldest stored) -> time, reads cached

  if n > 0 then
    -- Redis time can step back (failover, NTP): never let it run behind the ring.
    if now < newest then now = newest end
    times[n - 1] = newest
    if now - newest >= window_us then
      e = n
    else
      -- Events before `e` were seen to leave the window by the last write; a
      -- window changed since then (shortened or lengthened) counts from `e` on.
      times[e] = first
      e = sw_first_in_window(key, n, h, e, times, now, window_us)
    end
  end
  local in_window = n - e
  local allowed, remaining, reset_us, retry_us = true, limit - in_window - cost, window_us, 0
  if in_window + cost > limit then
    allowed, remaining = false, limit - in_window
    -- the `need` oldest events in the window must leave before `cost` fits
    local need = in_window + cost - limit
    retry_us = sw_time_at(key, n, h, times, e + need - 1) + window_us - now
    reset_us = newest + window_us - now
  end
  -- one constructor: the table is sized once (adding fields later rehashes it)
  return {
    key = key,
    limit = limit,
    n = n,
    h = h,
    e = e,
    w = w,
    written_w = window_ms + SW_EPOCH_EXPIRY,
    window_us = window_us,
    cost = cost,
    now = now,
    newest = newest,
    first = times[e],
    allowed = allowed,
    remaining = remaining,
    reset_us = reset_us,
    retry_us = retry_us,
  }
end

-- What is left as the window stands, for an admission that is not written
-- (a peek, or a grouped check another limit refused): `remaining` and the
-- reset are those of the window without this request.
local function sw_unwritten(r)
  local in_window = r.n - r.e
  r.remaining = r.limit - in_window
  r.reset_us = in_window > 0 and r.newest + r.window_us - r.now or 0
end

-- Packs a whole fresh window: header plus the given slot times, in order.
local function sw_pack(n, h, e, window_ms, first, newest, slot_times)
  local parts = { struct.pack(SW_HEADER, n, h, e, window_ms, first, newest) }
  for j = 1, #slot_times do parts[#parts + 1] = struct.pack('>i8', slot_times[j]) end
  return table.concat(parts)
end

-- Records `cost` events at `now` for an admitted request. The first write is
-- SET or SETRANGE (both deny-OOM), so under noeviction at maxmemory the whole
-- admit fails before anything is written.
local function sw_apply(r)
  local key, now, cost, n, h, e, limit = r.key, r.now, r.cost, r.n, r.h, r.e, r.limit
  local ttl_ms = sw_ttl_ms(now, r.window_us)
  if e == n then
    -- nothing left in the window: start a fresh, exactly sized string
    local fresh = struct.pack(SW_HEADER, cost, 0, 0, r.written_w, now, now) .. string.rep(struct.pack('>i8', now), cost)
    redis.call('SET', key, fresh, 'PX', ttl_ms)
    return
  end
  if n < limit and h ~= 0 then
    -- The limit was raised after the ring wrapped: lay it out again from the
    -- oldest event still in the window (rare, O(n) bytes copied by Redis, no
    -- per-slot work in Lua), then append as usual.
    local kept = sw_slot_bytes(key, (h + e) % n, n - e, n)
    local size = n - e + cost
    local header = struct.pack(SW_HEADER, size, 0, 0, r.written_w, r.first, now)
    redis.call('SET', key, header .. kept .. string.rep(struct.pack('>i8', now), cost), 'PX', ttl_ms)
    return
  end
  local stamp = struct.pack('>i8', now)
  local left = cost
  local grow = math.max(0, math.min(left, limit - n))
  if grow > 0 then -- growing: append after the newest
    redis.call('SETRANGE', key, SW_HEADER_BYTES + 8 * n, string.rep(stamp, grow))
    n = n + grow
    left = left - grow
  end
  while left > 0 do -- full: overwrite the oldest, which have left the window, up to the ring's end
    local run = math.min(left, n - h)
    redis.call('SETRANGE', key, SW_HEADER_BYTES + 8 * h, string.rep(stamp, run))
    h = (h + run) % n
    e = e - run
    left = left - run
  end
  -- the oldest event in the window is unchanged: only expired slots were overwritten
  redis.call('SETRANGE', key, 0, struct.pack(SW_HEADER, n, h, e, r.written_w, r.first, now))
  if n >= limit and r.n < limit then
    -- Just filled: appends grew the string greedily (up to 2x); copy it once
    -- into an exactly sized one, so a full window costs ~8 bytes per event.
    redis.call('SET', key, redis.call('GET', key), 'PX', ttl_ms)
  elseif r.w ~= r.written_w or math.floor(now / r.window_us) ~= math.floor(r.newest / r.window_us) then
    -- the first admission of an epoch (or of a changed window) moves the
    -- expiry; the others leave it, already past now + window
    redis.call('PEXPIRE', key, ttl_ms)
  end
end

-- As a strategy of lua/check.lua (see its header): check, apply, unwritten.
-- Record fields: limit, window µs.
local function sw_check(key, _value, cost, now, limit, window_us)
  return sw_eval(key, tonumber(limit), tonumber(window_us), cost, now)
end
