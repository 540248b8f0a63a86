-- The sessions of every tenant (ARGV[3] '0'), or of one (ARGV[3] '1', ARGV[4] the tenant: its
-- index and its global list), and the feed cursor they are all at: {cursor, {id, state}...}.
local out = {current_cursor()}
local ids
if ARGV[3] == '1' then
  ids = redis.call('ZRANGE', tenant_index(ARGV[4]), 0, -1)
  local global = GLOBAL
  if ARGV[4] ~= '' then global = ARGV[4] .. '/' .. GLOBAL end
  if redis.call('EXISTS', key('s', global)) == 1 then
    ids[#ids + 1] = global
    table.sort(ids, bytewise)  -- in id order, as every snapshot
  end
else
  ids = redis.call('ZRANGE', key('sessions'), 0, -1)
end
for _, id in ipairs(ids) do
  out[#out + 1] = {id, state_reply(id, load(id))}
end
return out
