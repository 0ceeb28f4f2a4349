-- Reference: the plain exact sliding window, a sorted-set log of admissions.
-- KEYS[1] the log; ARGV[1] limit; ARGV[2] window µs; ARGV[3] a unique member.
-- Reply: 1 or 0. Complexity: O(log n + expired) time, O(limit) memory.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return 1
