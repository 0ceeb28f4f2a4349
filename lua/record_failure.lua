-- record_failure: counts one failed attempt for a failure-backoff key, after
-- the handler has run (e.g. a wrong password).
-- KEYS[1]  the backoff key
-- ARGV[1]  base µs, ARGV[2] max µs, ARGV[3] free failures,
-- ARGV[4]  memory µs: failures are forgotten this long after the last one
-- Reply: the wait in µs the next attempt will face (integer).
-- Complexity: O(1) time and memory. The first write is HSET (deny-OOM).
local now = now_us()
local base_us, max_us, free, memory_us = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local failures = bo_read(KEYS[1], memory_us, now) + 1
redis.call('HSET', KEYS[1], 'n', failures, 't', string.format('%d', now))
redis.call('PEXPIRE', KEYS[1], key_ttl_ms(math.ceil(memory_us / 1000)))
return math.ceil(bo_delay_us(failures, base_us, max_us, free))
