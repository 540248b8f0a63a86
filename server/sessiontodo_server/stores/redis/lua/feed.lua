-- The feed after a cursor. ARGV[6] cursor, [7] at most this many entries.
-- {current cursor, entries...}.
local out = {current_cursor()}
for _, e in ipairs(redis.call('XRANGE', key('feed'), '(' .. ARGV[6] .. '-0', '+', 'COUNT', ARGV[7])) do
  out[#out + 1] = e[2][2]
end
return out
