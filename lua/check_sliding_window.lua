-- check_sliding_window: one sliding-window limit, the common case, without the
-- generic multi-limit loop.
-- fragments: lib/sliding_window
-- Reply: admitted, what remains (one integer; the window resets a whole
--   window after this admission). Refused: an array { remaining, reset µs,
--   retry-after µs }. (A table reply costs Redis ~0.7 µs; the common case
--   gets the integer.) A peek that would admit: { remaining, reset µs } of
--   the window as it stands (nothing was written).
-- Complexity: O(cost) amortised, O(cost + log limit) worst case; memory O(limit).
local window_key = KEYS[1] -- the window (a ring of admission times)
local cost = tonumber(ARGV[1]) -- events this request adds, 1..min(limit, 1024)
local limit = tonumber(ARGV[2]) -- events allowed in any window
local window_us = tonumber(ARGV[3]) -- the window, whole ms in µs
local debit = ARGV[4] == '1' -- '0': only read (peek)

local now = now_us()

-- The common case first, flat: one event, debited, into a ring that needs no
-- new layout, the window's start found in the header or the next few slots.
-- It returns before lib/sliding_window's functions are defined below (Redis
-- builds every function a script defines again on each call, ~0.15 µs each);
-- the same steps as sw_eval and sw_apply (the ring's layout is documented
-- there). Anything else falls through to them, which decide it whole:
-- nothing is written before either returns.
if cost == 1 and debit then
  local header = redis.call('GETRANGE', window_key, 0, 31)
  local n, h, e, w, first, newest = 0, 0, 0, 0, 0, 0
  if #header == 32 then n, h, e, w, first, newest = struct.unpack('>I4I4I4I4i8i8', header) end
  local at_now = now < newest and newest or now -- Redis time stepped back: never behind the ring
  if #header == 0 or (#header == 32 and n > 0 and at_now - newest >= window_us) then
    -- no key, or nothing left in the window: a fresh, exactly sized string of one event
    local written_w = window_us / 1000 + 2147483648 -- lib/sliding_window's SW_EPOCH_EXPIRY
    local fresh = struct.pack('>I4I4I4I4i8i8', 1, 0, 0, written_w, at_now, at_now) .. struct.pack('>i8', at_now)
    local ttl_ms = key_ttl_ms(math.ceil(((math.floor(at_now / window_us) + 2) * window_us - at_now) / 1000))
    redis.call('SET', window_key, fresh, 'PX', ttl_ms)
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
      if found and in_window + 1 > limit and in_window + 1 - limit == 1 then
        -- refused: the oldest event in the window must leave first
        return { limit - in_window, newest + window_us - at_now, first + window_us - at_now }
      end
      if found and in_window + 1 <= limit then
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
        local window_ms = window_us / 1000
        local written_w = window_ms + 2147483648 -- lib/sliding_window's SW_EPOCH_EXPIRY
        redis.call('SETRANGE', window_key, 0, struct.pack('>I4I4I4I4i8i8', n, h, e, written_w, first, at_now))
        local ttl_ms = key_ttl_ms(math.ceil(((math.floor(at_now / window_us) + 2) * window_us - at_now) / 1000))
        if filled then
          redis.call('SET', window_key, redis.call('GET', window_key), 'PX', ttl_ms)
        elseif w ~= written_w or math.floor(at_now / window_us) ~= math.floor(newest / window_us) then
          redis.call('PEXPIRE', window_key, ttl_ms)
        end
        return limit - in_window - 1
      end
    end
  end
end

-- <fragments>: lib/sliding_window follows here, for every other case
local r = sw_eval(window_key, limit, window_us, cost, now)
if r.allowed then
  if not debit then
    sw_unwritten(r)
    return { r.remaining, r.reset_us }
  end
  sw_apply(r)
  return r.remaining
end
return { r.remaining, r.reset_us, r.retry_us }
