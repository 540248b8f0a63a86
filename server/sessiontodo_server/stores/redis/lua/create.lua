-- Get or create a session. ARGV[3] id, [4] parent, [5] labels (JSON), [6] created at, [7] updated
-- at, [8] idle TTL, [9] max sessions, [10] origin, [11] max sessions of the id's tenant (0: none).
-- {1, entry, missed} created; {0, state} existing; {-1} parent missing; {-2} session limit;
-- {-3, parent} exists under another parent; {-4} the tenant's session limit.
local id, parent = ARGV[3], ARGV[4]
local existing = load(id)
if existing then
  if existing.parent ~= parent then return {-3, existing.parent} end
  return {0, state_reply(id, existing)}
end
if parent ~= '' and redis.call('EXISTS', key('s', parent)) == 0 then return {-1} end
if redis.call('ZCARD', key('sessions')) - 1 >= tonumber(ARGV[9]) then return {-2} end
local tenant, global = tenant_of(id), is_global(id)
local per_tenant = tonumber(ARGV[11])
if per_tenant > 0 and not global and redis.call('ZCARD', tenant_index(tenant)) >= per_tenant then return {-4} end
-- A re-created id starts above every revision its previous incarnation reached.
local start = redis.call('ZSCORE', key('marks'), id)
if start then
  redis.call('ZREM', key('marks'), id)
else
  start = redis.call('HGET', key('counters'), 'floor') or '0'
end
local st = {rev = tonumber(start), parent = parent, labels = ARGV[5], created = ARGV[6], updated = ARGV[7],
  ttl = ARGV[8], bytes = 0}
local behind = missed(current_cursor() + 1)
save(id, st)
redis.call('ZADD', key('sessions'), 0, id)
if not global then redis.call('ZADD', tenant_index(tenant), 0, id) end
if parent ~= '' then redis.call('ZADD', key('children'), 0, parent .. ' ' .. id) end
local entry = publish(head(id, 'session_created', st.rev, '', ARGV[10], '', st), '[]')
wake(entry)
return {1, entry, behind}
