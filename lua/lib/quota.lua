-- Calendar quota: at most `limit` units per UTC day, ISO week (from Monday) or
-- calendar month, optionally in a fixed offset from UTC; the count resets at
-- the period's boundary. State: one string "<period start µs> <count>"; a
-- stored start other than the current period's is a count of 0. The key
-- expires at the boundary (an idle quota costs nothing).
-- Calendar arithmetic is on whole days since 1970-01-01 (H. Hinnant's civil
-- date algorithms), exact in Lua's doubles: leap years and months of 28 to 31
-- days come out of the arithmetic, with no table of month lengths.
-- Complexity: O(1) time and memory.

local QT_DAY_US = 86400000000

-- Days since 1970-01-01 of a civil date (proleptic Gregorian).
local function qt_days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

-- The civil year and month of a day since 1970-01-01.
local function qt_civil_from_days(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end

-- The period holding `now` (µs): its start and end in UTC µs. `period` is
-- 'd', 'w' or 'm'; `offset_us` the fixed offset of local time from UTC.
local function qt_period(now, period, offset_us)
  local day = math.floor((now + offset_us) / QT_DAY_US)
  local first, next_first
  if period == 'd' then
    first, next_first = day, day + 1
  elseif period == 'w' then
    first = day - (day + 3) % 7 -- 1970-01-01 was a Thursday: Monday is (day + 3) % 7 == 0
    next_first = first + 7
  else
    local y, m = qt_civil_from_days(day)
    first = qt_days_from_civil(y, m, 1)
    next_first = m == 12 and qt_days_from_civil(y + 1, 1, 1) or qt_days_from_civil(y, m + 1, 1)
  end
  return first * QT_DAY_US - offset_us, next_first * QT_DAY_US - offset_us
end

-- As a strategy of lua/check.lua (see its header): check, apply, unwritten;
-- its counter is a value check.lua fetches (one MGET for a whole check).
-- Record fields: limit, period ('d' | 'w' | 'm'), offset from UTC in µs.
local function qt_check(key, stored, cost, now, limit, period, offset_us)
  limit = tonumber(limit)
  offset_us = tonumber(offset_us)
  local start, finish = qt_period(now, period, offset_us)
  local count = 0
  if stored then
    local stored_start, stored_count = string.match(stored, '^(%-?%d+) (%d+)$')
    stored_start = tonumber(stored_start)
    if stored_start == start then
      count = tonumber(stored_count)
    elseif stored_start and stored_start > start then
      -- Redis time stepped back across a boundary (a failover, NTP): the newer
      -- period stands, or its count would be forgotten and over-admitted
      start, finish = qt_period(stored_start, period, offset_us)
      count = tonumber(stored_count)
    end
  end
  local allowed, remaining, retry_us = true, limit - count - cost, 0
  if count + cost > limit then
    -- nothing comes back before the boundary: waiting exactly that long admits
    allowed, remaining, retry_us = false, limit - count, finish - now
  end
  return {
    key = key,
    cost = cost,
    limit = limit,
    count = count,
    start = start,
    reset_us = finish - now,
    allowed = allowed,
    remaining = remaining,
    retry_us = retry_us,
  }
end

local function qt_apply(r, _now)
  local stored = string.format('%d %d', r.start, r.count + r.cost)
  redis.call('SET', r.key, stored, 'PX', (key_ttl_extra_ms + math.max(1, math.ceil(r.reset_us / 1000))))
end

local function qt_unwritten(r)
  r.remaining = r.limit - r.count
  if r.count == 0 then r.reset_us = 0 end
end
