-- Reference: only the commands a steady sliding-window admit sends (TIME,
-- GETRANGE of the header, two SETRANGEs: a slot and the header), without the
-- window's logic; with two keys, those of two windows and a group's reply.
-- What the commands alone cost, to tell a script's Lua from its commands
-- (the bytes written mean nothing). KEYS[1] (KEYS[2]) the keys; ARGV[1] '1'
-- or '2' windows. Reply: one integer, or check.lua's 9 for two.
-- Complexity: O(1).
local t = redis.call('TIME')
local two = ARGV[1] == '2'
local h1 = redis.call('GETRANGE', KEYS[1], 0, 31)
local h2 = two and redis.call('GETRANGE', KEYS[2], 0, 31)
redis.call('SETRANGE', KEYS[1], 40, '12345678')
redis.call('SETRANGE', KEYS[1], 0, '12345678901234567890123456789012')
if not two then return 5 end
redis.call('SETRANGE', KEYS[2], 40, '12345678')
redis.call('SETRANGE', KEYS[2], 0, '12345678901234567890123456789012')
return { 1, 0, 0, 5, 1000000, 0, 5, 1000000, 0 }
