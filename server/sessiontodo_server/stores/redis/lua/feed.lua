-- The feed after a cursor. ARGV[3] cursor, [4] at most this many entries.
-- {current cursor, entries...}.
local out = {current_cursor()}
for _, e in ipairs(redis.call('XRANGE', key('feed'), '(' .. ARGV[3] .. '-0', '+', 'COUNT', ARGV[4])) do
  out[#out + 1] = e[2][2]
end
return out
