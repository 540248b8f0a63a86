-- Every session and the feed cursor they are all at: {cursor, {id, state}...}.
local out = {current_cursor()}
for _, id in ipairs(redis.call('ZRANGE', key('sessions'), 0, -1)) do
  out[#out + 1] = {id, state_reply(id, load(id))}
end
return out
