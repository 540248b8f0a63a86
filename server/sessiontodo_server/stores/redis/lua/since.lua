-- A session's changes after a revision. ARGV[3] id, [4] revision.
-- {0} missing or not bridgeable; {1, entries...} the changes after the revision, oldest first.
local st = load(ARGV[3])
if not st then return {0} end
local wanted = st.rev - tonumber(ARGV[4])
if wanted < 0 or redis.call('LLEN', key('h', ARGV[3])) < wanted then return {0} end
if wanted == 0 then return {1} end
local out = redis.call('LRANGE', key('h', ARGV[3]), -wanted, -1)
table.insert(out, 1, 1)
return out
