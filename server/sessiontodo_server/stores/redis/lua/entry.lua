-- The whole entry of one change (its list left out of the feed) from the session's history.
-- ARGV[3] session id, [4] cursor, [5] revision. The entry, or nil when no longer kept.
-- The history holds the session's last changes, one per revision, newest last (see since.lua),
-- so the change at a revision is the one that many places from the end; its cursor confirms it.
local st = load(ARGV[3])
if not st then return nil end
local back = st.rev - tonumber(ARGV[5])
if back < 0 then return nil end
local entry = redis.call('LINDEX', key('h', ARGV[3]), -back - 1)
local prefix = '[' .. ARGV[4] .. ','
if entry and string.sub(entry, 1, #prefix) == prefix then return entry end
return nil
