-- record_failure: counts one failed attempt for a failure-backoff key, after
-- the handler has run (e.g. a wrong password). Not for a policy with
-- countAttempts: its check counted the attempt already (lib/failure_backoff).
-- fragments: lib/failure_backoff
-- Reply: the wait in µs the next attempt will face (integer).
-- Complexity: O(1) time and memory. The first write is HSET (deny-OOM).
local backoff_key = KEYS[1] -- the backoff: a hash { n = failures, t = µs of the last }
local base_us = tonumber(ARGV[1]) -- the first wait, whole µs
local max_us = tonumber(ARGV[2]) -- the longest wait, whole µs
local free = tonumber(ARGV[3]) -- failures that cost no wait
local memory_us = tonumber(ARGV[4]) -- failures are forgotten this long after the last one

local now = clock_us
local failures = bo_read(backoff_key, memory_us, now) + 1
redis.call('HSET', backoff_key, 'n', failures, 't', string.format('%d', now))
redis.call('PEXPIRE', backoff_key, (key_ttl_extra_ms + math.ceil(memory_us / 1000)))
return bo_delay_us(failures, base_us, max_us, free)
