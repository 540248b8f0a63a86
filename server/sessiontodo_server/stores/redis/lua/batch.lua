-- A batch of writes, whole (``RedisStore.write_batch`` plans it in Python with mutations.apply's
-- rules on the state it read; this applies the plan atomically if that state still holds).
-- ARGV[3] the batch's request id ('' : none; 'tenant\nid'), [4] what to remember under it
-- (JSON [fingerprint, outcomes]), [5] the origin, [6] what the plan read, JSON
-- [[id, revision (-1: absent), children (-1: not counted), start revision of a created id (-1)], ...],
-- [7] the session counts read, JSON [in all (-1 : the batch creates none), {tenant: its sessions}],
-- [8] the steps in order, JSON:
--   ["write", id, kind, revision, todo id, labels (JSON), updated, idle TTL, bytes, [encoded todos]]
--   ["create", id, parent, labels (JSON), created, updated, idle TTL, revision]
--   ["remove", id]
-- Replies: {'ok', missed, entries...} | {'request', remembered} | {'conflict'} (plan again).
local request_id, origin = ARGV[3], ARGV[5]
if request_id ~= '' then
  local remembered = redis.call('GET', key('b', request_id))
  if remembered then return {'request', remembered} end
end
for _, read in ipairs(cjson.decode(ARGV[6])) do
  local id, revision, children, start = read[1], read[2], read[3], read[4]
  local now_at = redis.call('HGET', key('s', id), 'rev')
  if revision < 0 then
    if now_at then return {'conflict'} end
  elseif not now_at or tonumber(now_at) ~= revision then
    return {'conflict'}
  end
  if children >= 0 and redis.call('ZLEXCOUNT', key('children'), '[' .. id .. ' ', '(' .. id .. '!') ~= children then
    return {'conflict'}
  end
  if start >= 0 then
    local mark = redis.call('ZSCORE', key('marks'), id) or redis.call('HGET', key('counters'), 'floor') or '0'
    if tonumber(mark) ~= start then return {'conflict'} end
  end
end
local counts = cjson.decode(ARGV[7])
if counts[1] >= 0 and redis.call('ZCARD', key('sessions')) - 1 ~= counts[1] then return {'conflict'} end
for tenant, count in pairs(counts[2]) do
  if redis.call('ZCARD', tenant_index(tenant)) ~= count then return {'conflict'} end
end

local behind = missed(current_cursor() + 1)
local entries = {}
for _, step in ipairs(cjson.decode(ARGV[8])) do
  local op, id = step[1], step[2]
  if op == 'write' then
    local st = load(id)
    st.rev, st.labels, st.updated, st.ttl, st.bytes = step[4], step[6], step[7], step[8], step[9]
    save(id, st)
    local todos, ids, values, pairs_ = key('t', id), key('i', id), step[10], {}
    for _, encoded in ipairs(values) do
      pairs_[#pairs_ + 1] = cjson.decode(encoded)[1]
      pairs_[#pairs_ + 1] = encoded
    end
    redis.call('DEL', todos, ids)
    for first = 1, #values, 1000 do  -- in slices: unpack has a limit
      redis.call('RPUSH', todos, unpack(values, first, math.min(first + 999, #values)))
    end
    for first = 1, #pairs_, 1000 do
      redis.call('HSET', ids, unpack(pairs_, first, math.min(first + 999, #pairs_)))
    end
    local entry = publish(head(id, step[3], st.rev, step[5], origin, '', st), '[' .. table.concat(values, ',') .. ']')
    if HISTORY > 0 then
      redis.call('RPUSH', key('h', id), entry)
      redis.call('LTRIM', key('h', id), -HISTORY, -1)
    end
    entries[#entries + 1] = entry
  elseif op == 'create' then
    local st = {rev = step[8], parent = step[3], labels = step[4], created = step[5], updated = step[6],
      ttl = step[7], bytes = 0}
    redis.call('ZREM', key('marks'), id)
    save(id, st)
    redis.call('ZADD', key('sessions'), 0, id)
    if not is_global(id) then redis.call('ZADD', tenant_index(tenant_of(id)), 0, id) end
    if st.parent ~= '' then redis.call('ZADD', key('children'), 0, st.parent .. ' ' .. id) end
    entries[#entries + 1] = publish(head(id, 'session_created', st.rev, '', origin, '', st), '[]')
  else  -- remove: one session; its descendants are steps of their own
    local st = load(id)
    local removed_at = st.rev + 1
    entries[#entries + 1] = publish(head(id, 'session_removed', removed_at, '', origin, 'removed', st), '[]')
    redis.call('DEL', key('s', id), key('t', id), key('i', id), key('h', id), key('q', id), key('qr', id),
      key('qt', id))
    redis.call('ZREM', key('sessions'), id)
    redis.call('ZREM', tenant_index(tenant_of(id)), id)
    redis.call('ZREM', key('deadlines'), id)
    if st.parent ~= '' then redis.call('ZREM', key('children'), st.parent .. ' ' .. id) end
    redis.call('ZADD', key('marks'), removed_at + 1, id)
  end
end
local excess = redis.call('ZCARD', key('marks')) - REMOVED_MARKS
if excess > 0 then  -- as remove.lua: the lowest marks fold into the floor
  local floor = tonumber(redis.call('HGET', key('counters'), 'floor') or '0')
  local popped = redis.call('ZPOPMIN', key('marks'), excess)
  for i = 2, #popped, 2 do floor = math.max(floor, tonumber(popped[i])) end
  redis.call('HSET', key('counters'), 'floor', int(floor))
end
if request_id ~= '' then
  redis.call('SET', key('b', request_id), ARGV[4], 'EX', REQUEST_RETENTION_SECONDS)
end
if #entries > 0 then wake(#entries == 1 and entries[1] or nil) end
local reply = {'ok', behind}
for _, entry in ipairs(entries) do reply[#reply + 1] = entry end
return reply
