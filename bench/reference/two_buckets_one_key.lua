-- Reference: two token buckets stored in ONE key (both TATs in one 16-byte
-- string), to measure what a layout change could buy a grouped check of two
-- buckets: one GET and one SET instead of an MGET of two keys and a SET each.
-- Not production storage (each bucket has its own key there); the same
-- semantics and reply as bench/reference/two_buckets_flat.lua.
-- KEYS[1] both buckets; ARGV[1], ARGV[2] costs; ARGV[3], ARGV[4]
-- capacities; ARGV[5], ARGV[6] µs per token. Always debits when admitted.
-- Reply: allowed, binding, retry-after µs, then per bucket remaining, reset µs,
-- retry-after µs. Complexity: O(1).
local value = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local c1, c2 = tonumber(ARGV[1]), tonumber(ARGV[2])
local i1, i2 = tonumber(ARGV[5]), tonumber(ARGV[6])
local b1, b2 = tonumber(ARGV[3]) * i1, tonumber(ARGV[4]) * i2
local t1, t2 = now, now
if value then t1, t2 = struct.unpack('>i8i8', value) end
if t1 < now then t1 = now end
if t2 < now then t2 = now end
local d1, d2 = t1 - now, t2 - now
local n1, n2 = d1 + c1 * i1, d2 + c2 * i2
local r1, r2 = n1 > b1 and n1 - b1 or 0, n2 > b2 and n2 - b2 or 0
if r1 > 0 or r2 > 0 then
  local binding = (r1 > 0 and (r2 == 0 or r1 >= r2)) and 1 or 2
  return {
    0, binding, binding == 1 and r1 or r2,
    math.floor((b1 - d1) / i1), d1, r1, -- as the buckets stand: nothing was written
    math.floor((b2 - d2) / i2), d2, r2,
  }
end
-- the key lives as long as the longer debt
redis.call('SET', KEYS[1], struct.pack('>i8i8', now + n1, now + n2), 'PX', math.ceil(math.max(n1, n2) / 1000))
return { 1, 0, 0, math.floor((b1 - n1) / i1), n1, 0, math.floor((b2 - n2) / i2), n2, 0 }
