-- The whole entry of one change (its list left out of the feed) from the session's history.
-- ARGV[3] session id, [4] cursor. The entry, or nil when no longer kept.
local prefix = '[' .. ARGV[4] .. ','
local entries = redis.call('LRANGE', key('h', ARGV[3]), 0, -1)
for i = #entries, 1, -1 do
  if string.sub(entries[i], 1, #prefix) == prefix then return entries[i] end
end
return nil
