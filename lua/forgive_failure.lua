-- forgive_failure: takes back one pending failure of a failure-backoff key
-- whose check counted the attempt (countAttempts), when the attempt could
-- not be decided after all (the user directory did not answer). Only for a
-- key whose holder alone can spend it (a device's, keyed by a secret): on a
-- key anyone can name, forgiving would hand an attacker back the attempts
-- an outage they caused cost them.
-- fragments: lib/failure_backoff
-- KEYS[1]      the backoff: a hash { n = failures, t = µs of the last }
-- ARGV[1]      failures are forgotten this long after the last one, µs
-- ARGV[2]      optional: forgive only while at most this many failures are
--              remembered (the policy's free failures: a forgiveness then
--              never ends a wait, when the caller cannot tell whether its
--              attempt was counted here or refused by the wait already)
-- Reply: the failures remembered after it (integer, never below 0). It
--   undoes this attempt's count only; the time of the last failure is kept
--   (the wait is then the one n - 1 failures give from that time).
-- Complexity: O(1) time and memory. Its one write, HSET, is deny-OOM: at
--   maxmemory nothing is forgiven (the attempt stays counted).
local backoff_key = KEYS[1]
local memory_us = tonumber(ARGV[1])
local at_most = tonumber(ARGV[2])

local failures = bo_read(backoff_key, memory_us, clock_us)
if failures == 0 then return 0 end
if at_most and failures > at_most then return failures end
redis.call('HSET', backoff_key, 'n', failures - 1)
return failures - 1
