-- Holds of a cost budget: what reservations hold until they are settled.
-- A budget is a token bucket of cost units (lib/token_bucket); a reserve
-- charges its estimate to the bucket at once, and a settle replaces it by
-- the actual cost (the difference refunded, or debited).
--   holds     sorted set: reservation id -> µs its hold lapses
--   amounts   hash:       reservation id -> what its hold charged (holds_amount)
--   settled   sorted set: reservation id -> µs it was settled
-- A hold that lapses unsettled (its caller crashed, or was killed at its
-- timeout) stays CHARGED its estimate: nothing is refunded by a lapse, so a
-- crash or a timeout never gives budget back. It is remembered for
-- `retention_us` after it lapsed, so a late settle still corrects it once
-- (reply 'late'), and a second settle of the same id changes nothing.
-- Bounded memory: an id is forgotten `retention_us` after its hold lapsed or
-- it was settled, and past HOLDS_MAX_IDS per set the oldest are forgotten;
-- at most HOLDS_FORGOTTEN_PER_CALL per set per call, so every call's work and
-- every key's size stay bounded (a key expiring whole frees at most
-- HOLDS_MAX_IDS members). Forgetting errs towards charging: a forgotten hold
-- stays charged its estimate (its settle answers 'unknown' and changes
-- nothing), a forgotten settled id makes a repeated settle 'unknown'.
-- Complexity: O(log n + k) per call, k <= HOLDS_FORGOTTEN_PER_CALL; memory
-- O(min(ids within the hold and the retention, HOLDS_MAX_IDS)).

local HOLDS_FORGOTTEN_PER_CALL = 100
local HOLDS_MAX_IDS = 10000

-- A hold's charge as `amounts` keeps it: the whole µs of debt it added, with
-- a 'us' suffix, so a settle gives back exactly what was charged even when
-- the budget's refill rate changed in between (an override). A bare number
-- (an amount kept before they were kept in µs) is units at the rate in force.
local function holds_amount(units, interval_us)
  return string.format('%dus', units * interval_us)
end

local function holds_held_us(amount, interval_us)
  local us = string.match(amount, '^(%d+)us$')
  return us and tonumber(us) or tonumber(amount) * interval_us
end

-- Replaces a hold that charged `held_us` by the actual cost at the rate in
-- force: the difference refunded or debited. A refund never leaves more than
-- the capacity (one after the bucket refilled is not banked: tb_store of no
-- debt deletes the key); an extra debit may go past empty (a call that cost
-- more than it reserved), and later reservations wait until it is paid back.
-- Nothing is written when the two are equal.
local function holds_true_up(budget_key, held_us, actual, interval_us, now)
  local actual_us = actual * interval_us
  if actual_us ~= held_us then tb_store(budget_key, tb_debt(budget_key, now) + actual_us - held_us, now) end
end

-- The lowest-scored members of a sorted set to forget now: those scored at
-- or before `stale`, and the oldest past the cap (leaving room for the one
-- this call may add), at most the per-call bound.
local function holds_to_forget(key, stale)
  local excess = redis.call('ZCARD', key) - HOLDS_MAX_IDS + 1
  if excess > 0 then
    return redis.call('ZRANGEBYSCORE', key, '-inf', '+inf', 'LIMIT', 0, math.min(excess, HOLDS_FORGOTTEN_PER_CALL))
  end
  return redis.call('ZRANGEBYSCORE', key, '-inf', stale, 'LIMIT', 0, HOLDS_FORGOTTEN_PER_CALL)
end

-- Forgets lapsed holds and settled ids older than the retention, and the
-- oldest of either past the cap (a forgotten hold stays charged).
-- `oom_gate` (a string key, or nil): for an admission, which must fail whole at
-- maxmemory. Redis checks OOM only at a deny-OOM command called before the
-- script's first write, and forgetting is a write (ZREM, not deny-OOM); so
-- before forgetting anything an empty SETRANGE on that key goes first: it is
-- deny-OOM (refused at maxmemory, with nothing written) and otherwise changes
-- nothing (an empty SETRANGE neither creates a key nor alters one).
local function holds_forget(holds_key, amounts_key, settled_key, retention_us, now, oom_gate)
  local holds = holds_to_forget(holds_key, now - retention_us)
  local settled = holds_to_forget(settled_key, now - retention_us)
  if oom_gate and (#holds > 0 or #settled > 0) then redis.call('SETRANGE', oom_gate, 0, '') end
  if #holds > 0 then
    redis.call('ZREM', holds_key, unpack(holds))
    redis.call('HDEL', amounts_key, unpack(holds))
  end
  if #settled > 0 then redis.call('ZREM', settled_key, unpack(settled)) end
end

-- Where the budget stands now: whole units left (below 0 while owed) and its debt in µs.
local function holds_standing(budget_key, capacity, interval_us, now)
  local debt = tb_debt(budget_key, now)
  return math.floor((capacity * interval_us - debt) / interval_us), debt
end

-- Every key of the budget lives as long as a hold or a remembered id may need it.
local function holds_keep(keys, ms)
  for _, key in ipairs(keys) do redis.call('PEXPIRE', key, (key_ttl_extra_ms + ms)) end
end

-- Settles reservation `id` with its actual cost: the hold replaced by it
-- (the difference refunded or debited) and the id remembered as settled.
-- Answers 1 settled, 2 late (the hold had lapsed, charged), 3 duplicate
-- (settled already: nothing changes), 4 unknown (nothing held: nothing
-- changes). Its first write is the bucket's SET (deny-OOM: refused at
-- maxmemory when nothing was written before it) when the actual cost differs
-- from the hold, else the hold's ZREM.
local function holds_settle(budget_key, holds_key, amounts_key, settled_key, id, actual, interval_us, retention_us, now)
  holds_forget(holds_key, amounts_key, settled_key, retention_us, now)
  if redis.call('ZSCORE', settled_key, id) then return 3 end
  local amount = redis.call('HGET', amounts_key, id)
  if not amount then return 4 end
  local outcome = (tonumber(redis.call('ZSCORE', holds_key, id)) or now) > now and 1 or 2
  holds_true_up(budget_key, holds_held_us(amount, interval_us), actual, interval_us, now)
  redis.call('ZREM', holds_key, id)
  redis.call('HDEL', amounts_key, id)
  redis.call('ZADD', settled_key, now, id)
  holds_keep({ settled_key }, math.ceil(retention_us / 1000))
  return outcome
end
