-- check_sliding_window: sliding-window limits only, the common cases: one
-- window (an IP's, a channel's), or a group decided all-or-nothing (a Slack
-- or Telegram event's workspace and channel), optionally with a once-only
-- claim decided in the same script. Without lua/check.lua's generic loop: no
-- dispatch, no table per limit, no helper function on the common paths.
-- fragments: lib/sliding_window
-- KEYS[1..N]   the windows (rings of admission times), one hash slot
-- KEYS[c]      a once-only claim key (same slot), when ARGV names it
-- ARGV, the short form: one window, debited when admitted, no claim (an IP's
--   window, the common check): limit (events allowed in any window), window
--   µs (whole ms), for one event; or cost (events this request adds,
--   1..min(limit, 1024)), limit, window µs. Told apart from the full form by
--   their count (2 or 3 arguments; the full form has 4 at least).
-- ARGV, the full form (a peek, a group, a claim):
--   ARGV[1]      N, the number of windows (1..16); -N to only read (a peek)
--   ARGV[2..]    per window, 3 each: cost, limit, window µs
--   ARGV after the windows, optional: lua/check.lua's claim record: 'claim',
--                c (the claim's index in KEYS), its TTL ms, '1' to keep it
--                when refused, the attempt's token and its pending ms
--                (lua/check.lua's: the claim's value is '<token>:<Redis ms
--                taken>', settled only by that attempt; layer/src/core/claim.ts).
--                A claim already taken answers { 2 }, or { 3 } while
--                pending: nothing counted, nothing written. One past its
--                pending time and unmarked is taken over, as is no claim: the
--                claim is set after the windows' writes with an admission
--                (debited), or with a refusal when kept.
-- Reply, one window: admitted, what remains (one integer, >= 0; the window
--   resets a whole window after this admission). Refused at cost 1 by a
--   full window shorter than 2^26 µs (~67 s: the webhooks' per-IP windows,
--   a flood's every refusal): one negative integer, -1 - (retry-after µs *
--   2^26 + reset µs), exact (< 2^52; nothing remains). Any other refusal:
--   an array { remaining, reset µs, retry-after µs }. (A
--   table reply costs Redis ~0.7 µs; the common cases get the integer.) A
--   peek that would admit: { remaining, reset µs } of the window as it
--   stands (nothing was written).
-- Reply, N > 1: lua/check.lua's, with its semantics: allowed (1|0), binding
--   window (1-based, 0 when admitted: the longest retry-after, the first of
--   equals), retry-after µs, then per window remaining, reset µs, retry-after
--   µs; every window admits and all are debited, or nothing is written.
-- Complexity: per window O(cost) amortised, O(cost + log limit) worst case;
-- memory O(limit) per window.
-- A lone window's record: its cost, and where its limit and window are in ARGV
-- (the short form's, unless the full form follows).
local count, debit, lone_cost, lone_at = 1, true, 1, 1
if arg_count == 3 then lone_cost, lone_at = tonumber(ARGV[1]), 2 end
local claim_key, claim_ttl_ms, claim_kept, claim_token, claim_pending_ms
if arg_count > 3 then
  count = tonumber(ARGV[1])
  debit = count > 0
  if not debit then count = -count end
  lone_cost, lone_at = tonumber(ARGV[2]), 3
  local claim_at = 3 * count + 2
  if ARGV[claim_at] == 'claim' then
    claim_key, claim_ttl_ms, claim_kept = KEYS[tonumber(ARGV[claim_at + 1])], tonumber(ARGV[claim_at + 2]), ARGV[claim_at + 3] == '1'
    claim_token, claim_pending_ms = ARGV[claim_at + 4], tonumber(ARGV[claim_at + 5])
    -- GET, not EXISTS: the functions' ACL user runs only the commands it needs
    -- (the claim's reading, inline as in lua/check.lua: a shared function would be built on every call)
    local held = redis.call('GET', claim_key)
    if held then
      -- '<token>:<Redis ms taken>': its event not yet marked handed on (lua/settle_claim.lua adds ':d');
      -- anything else (delivered, or a claim with no pending time) is a duplicate
      local taken_ms = claim_pending_ms > 0 and tonumber(string.match(held, '^[^:]*:(%d+)$'))
      if not taken_ms then return { 2 } end
      -- younger than the pending time: its attempt may still hand it on or give it back. Younger in
      -- either direction: a claim stamped far ahead (Redis' clock stepped back, a failover to a node behind)
      -- would otherwise hold every delivery off until the clock caught up
      local age_ms = clock_us / 1000 - taken_ms
      if age_ms < claim_pending_ms and age_ms > -claim_pending_ms then return { 3 } end
      -- older and neither marked nor given back: its attempt died mid-put. Taken over: decided
      -- afresh, and an admission overwrites it with this attempt's (a refusal too when kept; else leaves it)
    end
  end
end

local now = clock_us
-- the claim's value: this attempt's token, and when it was taken (Redis ms)
local claim_value = claim_key and claim_token .. ':' .. string.format('%d', math.floor(now / 1000))

-- The common cases first, flat: one event per window into rings that need no
-- new layout, each window's start found in its header or the next few slots.
-- They return before lib/sliding_window's functions are defined below (Redis
-- builds every function a script defines again on each call, ~0.15 µs each);
-- the same steps as sw_eval, sw_apply and sw_unwritten (the ring's layout is
-- documented there). Anything else falls through to them, which decide it
-- whole: nothing is written before either path returns.
if count == 1 and debit and lone_cost == 1 then
  local window_key, limit, window_us = KEYS[1], tonumber(ARGV[lone_at]), tonumber(ARGV[lone_at + 1])
  local header = redis.call('GETRANGE', window_key, 0, 31)
  local n, h, e, w, first, newest = 0, 0, 0, 0, 0, 0
  if #header == 32 then n, h, e, w, first, newest = struct.unpack('>I4I4I4I4i8i8', header) end
  local at_now = now < newest and newest or now -- Redis time stepped back: never behind the ring
  if #header == 0 or (#header == 32 and n > 0 and at_now - newest >= window_us) then
    -- no key, or nothing left in the window: a fresh, exactly sized string of one event
    local written_w = window_us / 1000 + 2147483648 -- lib/sliding_window's SW_EPOCH_EXPIRY
    local fresh = struct.pack('>I4I4I4I4i8i8i8', 1, 0, 0, written_w, at_now, at_now, at_now)
    local ttl_ms = (key_ttl_extra_ms + math.ceil(((math.floor(at_now / window_us) + 2) * window_us - at_now) / 1000))
    redis.call('SET', window_key, fresh, 'PX', ttl_ms)
    if claim_key then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end
    return limit - 1
  end
  if #header == 32 then
    if n > 0 and e < n and at_now - newest < window_us and (n >= limit or h == 0) then
      local found = at_now - first < window_us
      if not found then
        -- the event at e left: the next ones, up to 4 (to the ring's end), short of the newest
        e = e + 1
        local at = (h + e) % n
        local run = math.min(4, n - 1 - e, n - at)
        if run > 0 then
          local slots = redis.call('GETRANGE', window_key, 32 + 8 * at, 32 + 8 * (at + run) - 1)
          for j = 0, run - 1 do
            local t = struct.unpack('>i8', slots, 8 * j + 1)
            if at_now - t < window_us then
              first, found = t, true
              break
            end
            e = e + 1
          end
        end
        if not found and e == n - 1 then first, found = newest, true end
      end
      local in_window = n - e
      if found and in_window == limit then
        -- refused: the oldest event in the window must leave first
        if claim_kept then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end
        local reset_us, retry_us = newest + window_us - at_now, first + window_us - at_now
        if window_us < 67108864 then -- 2^26 µs: both (at most a window) fit in one exact integer (< 2^52)
          return -1 - (retry_us * 67108864 + reset_us)
        end
        return { 0, reset_us, retry_us }
      end
      if found and in_window < limit then
        local stamp = struct.pack('>i8', at_now)
        local filled = false
        if n < limit then -- growing: append after the newest
          redis.call('SETRANGE', window_key, 32 + 8 * n, stamp)
          n = n + 1
          filled = n >= limit
        else -- full: overwrite the oldest, which has left the window
          redis.call('SETRANGE', window_key, 32 + 8 * h, stamp)
          h = (h + 1) % n
          e = e - 1
        end
        local written_w = window_us / 1000 + 2147483648 -- lib/sliding_window's SW_EPOCH_EXPIRY
        redis.call('SETRANGE', window_key, 0, struct.pack('>I4I4I4I4i8i8', n, h, e, written_w, first, at_now))
        local epoch = math.floor(at_now / window_us)
        if filled or w ~= written_w or epoch ~= math.floor(newest / window_us) then
          local ttl_ms = (key_ttl_extra_ms + math.ceil(((epoch + 2) * window_us - at_now) / 1000))
          if filled then
            redis.call('SET', window_key, redis.call('GET', window_key), 'PX', ttl_ms)
          else
            redis.call('PEXPIRE', window_key, ttl_ms)
          end
        end
        if claim_key then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end
        return limit - in_window - 1
      end
    end
  end
elseif count > 1 then
  -- A group, each window as above (one event each, checked or peeked). The
  -- reply is filled in as the windows are read; what the writes need of each
  -- window is kept in `ring`, 7 entries a window: 0 when fresh (no key, or
  -- nothing left in it), else n; then h, e, w, the first event in the
  -- window's time, the newest's, and the window's now. Two windows (the
  -- webhooks' group) get both tables sized at once: a table filled entry by
  -- entry is rehashed as it grows.
  local reply, ring
  if count == 2 then
    reply, ring = { 1, 0, 0, 0, 0, 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
  else
    reply, ring = { 1, 0, 0 }, {}
  end
  local flat = true
  for i = 1, count do
    local at = 3 * i - 1
    if ARGV[at] ~= '1' then
      flat = false
      break
    end
    local window_key, limit, window_us = KEYS[i], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    local header = redis.call('GETRANGE', window_key, 0, 31)
    local n, h, e, w, first, newest = 0, 0, 0, 0, 0, 0
    if #header == 32 then n, h, e, w, first, newest = struct.unpack('>I4I4I4I4i8i8', header) end
    local at_now = now < newest and newest or now -- Redis time stepped back: never behind the ring
    local r, s = 3 * i, 7 * i - 7
    if #header == 0 or (#header == 32 and n > 0 and at_now - newest >= window_us) then
      reply[r + 1], reply[r + 2], reply[r + 3] = limit - 1, window_us, 0
      ring[s + 1], ring[s + 7] = 0, at_now
    elseif #header == 32 and n > 0 and e < n and at_now - newest < window_us and (n >= limit or h == 0) then
      local found = at_now - first < window_us
      if not found then
        e = e + 1
        local slot = (h + e) % n
        local run = math.min(4, n - 1 - e, n - slot)
        if run > 0 then
          local slots = redis.call('GETRANGE', window_key, 32 + 8 * slot, 32 + 8 * (slot + run) - 1)
          for j = 0, run - 1 do
            local t = struct.unpack('>i8', slots, 8 * j + 1)
            if at_now - t < window_us then
              first, found = t, true
              break
            end
            e = e + 1
          end
        end
        if not found and e == n - 1 then first, found = newest, true end
      end
      local in_window = n - e
      if found and in_window < limit then
        reply[r + 1], reply[r + 2], reply[r + 3] = limit - in_window - 1, window_us, 0
      elseif found and in_window == limit then
        local retry_us = first + window_us - at_now
        reply[r + 1], reply[r + 2], reply[r + 3] = 0, newest + window_us - at_now, retry_us
        if reply[1] == 1 or retry_us > reply[3] then reply[1], reply[2], reply[3] = 0, i, retry_us end
      else
        flat = false
        break
      end
      ring[s + 1], ring[s + 2], ring[s + 3], ring[s + 4], ring[s + 5], ring[s + 6], ring[s + 7] =
        n, h, e, w, first, newest, at_now
    else
      flat = false
      break
    end
  end
  if flat then
    if reply[1] == 1 and debit then
      for i = 1, count do
        local window_key, limit, window_us = KEYS[i], tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
        local s = 7 * i - 7
        local n, at_now = ring[s + 1], ring[s + 7]
        local written_w = window_us / 1000 + 2147483648 -- lib/sliding_window's SW_EPOCH_EXPIRY
        local epoch = math.floor(at_now / window_us)
        if n == 0 then
          local fresh = struct.pack('>I4I4I4I4i8i8i8', 1, 0, 0, written_w, at_now, at_now, at_now)
          redis.call('SET', window_key, fresh, 'PX', (key_ttl_extra_ms + math.ceil(((epoch + 2) * window_us - at_now) / 1000)))
        else
          local h, e, newest = ring[s + 2], ring[s + 3], ring[s + 6]
          local stamp = struct.pack('>i8', at_now)
          local filled = false
          if n < limit then
            redis.call('SETRANGE', window_key, 32 + 8 * n, stamp)
            n = n + 1
            filled = n >= limit
          else
            redis.call('SETRANGE', window_key, 32 + 8 * h, stamp)
            h = (h + 1) % n
            e = e - 1
          end
          redis.call('SETRANGE', window_key, 0, struct.pack('>I4I4I4I4i8i8', n, h, e, written_w, ring[s + 5], at_now))
          if filled or ring[s + 4] ~= written_w or epoch ~= math.floor(newest / window_us) then
            local ttl_ms = (key_ttl_extra_ms + math.ceil(((epoch + 2) * window_us - at_now) / 1000))
            if filled then
              redis.call('SET', window_key, redis.call('GET', window_key), 'PX', ttl_ms)
            else
              redis.call('PEXPIRE', window_key, ttl_ms)
            end
          end
        end
      end
      if claim_key then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end
      return reply
    end
    -- nothing was written: an admitted window reports what is left as it stands
    for i = 1, count do
      local r, s = 3 * i, 7 * i - 7
      if reply[r + 3] == 0 then
        reply[r + 1] = reply[r + 1] + 1
        reply[r + 2] = ring[s + 1] == 0 and 0 or ring[s + 6] + tonumber(ARGV[3 * i + 1]) - ring[s + 7]
      end
    end
    if claim_kept and debit then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end
    return reply
  end
end

-- <fragments>: lib/sliding_window follows here, for every other case
if count == 1 then
  local r = sw_eval(KEYS[1], tonumber(ARGV[lone_at]), tonumber(ARGV[lone_at + 1]), lone_cost, now)
  if r.allowed then
    if not debit then
      sw_unwritten(r)
      return { r.remaining, r.reset_us }
    end
    sw_apply(r)
    if claim_key then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end
    return r.remaining
  end
  if claim_kept and debit then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end
  return { r.remaining, r.reset_us, r.retry_us }
end

-- A group, as lua/check.lua decides it
local results, allowed, binding, retry_max = {}, true, 0, 0
for i = 1, count do
  local at = 3 * i - 1
  local r = sw_eval(KEYS[i], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at]), now)
  results[i] = r
  if not r.allowed then
    allowed = false
    if r.retry_us > retry_max or binding == 0 then binding, retry_max = i, r.retry_us end
  end
end
local written = allowed and debit
for i = 1, count do
  if written then
    sw_apply(results[i])
  elseif results[i].allowed then
    sw_unwritten(results[i]) -- nothing was written: report what is left as it stands
  end
end
-- after the windows: at maxmemory an admission fails whole at its first write
if claim_key and debit and (allowed or claim_kept) then redis.call('SET', claim_key, claim_value, 'PX', claim_ttl_ms) end
local reply = { allowed and 1 or 0, binding, retry_max }
for i = 1, count do
  local r = results[i]
  reply[3 * i + 1], reply[3 * i + 2], reply[3 * i + 3] = r.remaining, r.reset_us, r.retry_us
end
return reply
