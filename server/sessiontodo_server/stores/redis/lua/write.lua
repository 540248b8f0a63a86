-- One write, whole: the list operation runs here, atomically, as mutations.apply does it in Python.
-- ARGV[3] JSON strings [session id, operation, expected revision ('' : any), request id ('' : none),
-- origin, now, the request's fingerprint], [4] the limits (max todos, max list bytes, max metadata bytes, max labels,
-- separated by spaces), then the operation's arguments from [5]:
--   replace: the encoded todos one per line ('' : none)
--   add: id, encoded todo, bytes, index ('' : end), id given ('1' or '')
--   update: todo id, content, status, priority ('' : unchanged), metadata to set (JSON), keys to remove (JSON)
--   remove: todo id
--   claim, renew, release, lapse: todo id, owner, lease ms, now ms (see below)
--   session: labels to set (JSON), keys to remove (JSON), idle TTL ('' : unchanged)
-- Replies: {'ok', entry (its list left out for a replace: the caller has it), index, missed} |
-- {'same', state} | {'request', result, state} |
-- {'missing'} | {'mismatch', revision} | {'duplicate'} | {'todo_missing'} | {'full', 'count' | 'bytes'} |
-- {'metadata_too_large'} | {'list_too_large'} | {'too_many_labels'} |
-- {'taken', owner} | {'blocked', ids} | {'not_pending', status} | {'not_held', owner, status} |
-- {'graph'}: the list's task-graph fields (leases to keep, blockers to strip, lease rules) need
-- mutations.apply's rules: plan the write in Python instead (store.py's _planned_write)
local id, op, expected, request_id, origin, now, fingerprint = unpack(cjson.decode(ARGV[3]))
local st = load(id)
if not st then return {'missing'} end
if request_id ~= '' then
  local previous = redis.call('HGET', key('q', id), request_id)
  if previous then return {'request', previous, state_reply(id, st)} end
end
if expected ~= '' and tonumber(expected) ~= st.rev then return {'mismatch', int(st.rev)} end

local MAX_TODOS, MAX_BYTES, MAX_METADATA, MAX_LABELS = string.match(ARGV[4], '^(%d+) (%d+) (%d+) (%d+)$')
MAX_TODOS, MAX_BYTES, MAX_METADATA, MAX_LABELS = tonumber(MAX_TODOS), tonumber(MAX_BYTES), tonumber(MAX_METADATA),
  tonumber(MAX_LABELS)
local todos, ids = key('t', id), key('i', id)
local kind, todo_id, index, added = nil, '', 0, nil
local values = nil  -- a replace's encoded todos: the list as it now stands

local function push_all(command, target, values)  -- in slices: unpack has a limit
  for first = 1, #values, 1000 do
    redis.call(command, target, unpack(values, first, math.min(first + 999, #values)))
  end
end

if op == 'replace' then
  local pairs_, bytes = {}, 0
  values = {}
  for encoded in string.gmatch(ARGV[5], '[^\n]+') do  -- JSON escapes every newline inside a todo
    local todo = cjson.decode(encoded)
    values[#values + 1] = encoded
    pairs_[#pairs_ + 1] = todo[1]
    pairs_[#pairs_ + 1] = encoded
    bytes = bytes + todo_bytes(todo)
  end
  local current = redis.call('LRANGE', todos, 0, -1)
  for _, encoded in ipairs(current) do  -- leases carry over a replace: the planned path applies that rule
    if string.find(encoded, '"lease_until_ms":', 1, true) then return {'graph'} end
  end
  local same = #current == #values
  for i = 1, #values do
    if not same then break end
    same = current[i] == values[i]
  end
  if same then return {'same', state_reply(id, st)} end
  redis.call('DEL', todos, ids)
  push_all('RPUSH', todos, values)
  push_all('HSET', ids, pairs_)
  st.bytes = bytes
  kind = 'todos_replaced'
elseif op == 'add' then
  local new_id, encoded = ARGV[5], ARGV[6]
  if ARGV[9] == '1' and redis.call('HEXISTS', ids, new_id) == 1 then return {'duplicate'} end
  local count = redis.call('LLEN', todos)
  if count >= MAX_TODOS then return {'full', 'count'} end
  if st.bytes + tonumber(ARGV[7]) > MAX_BYTES then return {'full', 'bytes'} end
  index = count
  if ARGV[8] ~= '' then index = math.min(math.max(tonumber(ARGV[8]), 0), count) end
  if index == count then
    redis.call('RPUSH', todos, encoded)
  elseif index == 0 then
    redis.call('LPUSH', todos, encoded)
  else  -- encoded todos are unique (their ids are), so the one at the index is a precise pivot
    redis.call('LINSERT', todos, 'BEFORE', redis.call('LINDEX', todos, index), encoded)
  end
  redis.call('HSET', ids, new_id, encoded)
  st.bytes = st.bytes + tonumber(ARGV[7])
  kind, todo_id, added = 'todo_added', new_id, encoded
elseif op == 'update' or op == 'remove' then
  todo_id = ARGV[5]
  local old = redis.call('HGET', ids, todo_id)
  if not old then return {'todo_missing'} end
  local todo = cjson.decode(old)
  local old_bytes = todo_bytes(todo)
  if op == 'remove' then
    for _, encoded in ipairs(redis.call('LRANGE', todos, 0, -1)) do  -- blockers to strip: the planned path
      if string.find(encoded, '"blocked_by":[', 1, true) then return {'graph'} end
    end
    redis.call('LREM', todos, 1, old)
    redis.call('HDEL', ids, todo_id)
    st.bytes = st.bytes - old_bytes
    kind = 'todo_removed'
  else
    local set_metadata, remove_metadata = cjson.decode(ARGV[9]), cjson.decode(ARGV[10])
    if next(set_metadata) or #remove_metadata > 0 then
      local metadata = todo[5] or {}
      for k, v in pairs(set_metadata) do metadata[k] = v end
      for _, k in ipairs(remove_metadata) do metadata[k] = nil end
      if entries_bytes(metadata) > MAX_METADATA then return {'metadata_too_large'} end
      todo[5] = metadata
    end
    if ARGV[6] ~= '' then todo[2] = ARGV[6] end
    if ARGV[7] ~= '' then todo[3] = ARGV[7] end
    if ARGV[8] ~= '' then todo[4] = ARGV[8] end
    if todo[6] and todo[6].lease_until_ms and todo[3] ~= 'in_progress' then  -- claims.after_update
      todo[6].lease_ms, todo[6].lease_until_ms = nil, nil
    end
    local encoded = encode_todo(todo)
    if encoded == old then return {'same', state_reply(id, st)} end
    local bytes = st.bytes - old_bytes + todo_bytes(todo)
    if bytes > MAX_BYTES then return {'list_too_large'} end
    redis.call('LSET', todos, redis.call('LPOS', todos, old), encoded)
    redis.call('HSET', ids, todo_id, encoded)
    st.bytes = bytes
    kind = 'todo_updated'
  end
elseif op == 'claim' or op == 'renew' or op == 'release' or op == 'lapse' then
  -- claims.py's rules. ARGV[5] the todo id ('' : a claim of the first ready todo), [6] the owner,
  -- [7] the lease in ms ('' : none; a renewal: the claim's own), [8] now in ms.
  local owner, lease, now_ms = ARGV[6], ARGV[7], tonumber(ARGV[8])
  local list = redis.call('LRANGE', todos, 0, -1)
  local position, todo
  local finished = {}
  for i, encoded in ipairs(list) do
    local t = cjson.decode(encoded)
    if t[3] == 'completed' or t[3] == 'cancelled' then finished[t[1]] = true end
    if ARGV[5] ~= '' and t[1] == ARGV[5] then position, todo = i, t end
    list[i] = t
  end
  local function graph_of(t)
    t[6] = t[6] or {}
    return t[6]
  end
  local function waiting_on(t)  -- its unfinished blockers
    local waiting = {}
    for _, blocker in ipairs((t[6] or {}).blocked_by or {}) do
      if not finished[blocker] then waiting[#waiting + 1] = blocker end
    end
    return waiting
  end
  if ARGV[5] == '' then  -- the first ready todo: pending, unowned, every blocker finished
    for i, t in ipairs(list) do
      if t[3] == 'pending' and ((t[6] or {}).owner or '') == '' and #waiting_on(t) == 0 then
        position, todo = i, t
        break
      end
    end
    if not todo then return {'same', state_reply(id, st)} end  -- nothing ready: an answer
  elseif not todo then
    -- a lapse of a removed todo has nothing to do (claims.lapse); anything else names a todo that is not there
    if op == 'lapse' then return {'same', state_reply(id, st)} end
    return {'todo_missing'}
  end
  local old_bytes = todo_bytes(todo)
  local g = graph_of(todo)
  local held = todo[3] == 'in_progress' and g.owner == owner
  if op == 'claim' then
    if held then
      if lease == '' then return {'same', state_reply(id, st)} end  -- claimed again, as it was
    elseif todo[3] == 'completed' or todo[3] == 'cancelled' then
      return {'not_pending', todo[3]}
    elseif (g.owner or '') ~= '' and g.owner ~= owner then
      return {'taken', g.owner}
    elseif todo[3] ~= 'pending' then
      return {'not_pending', todo[3]}
    elseif #waiting_on(todo) > 0 then
      return {'blocked', table.concat(waiting_on(todo), ',')}
    end
    todo[3], g.owner = 'in_progress', owner
    if lease ~= '' then lease = tonumber(lease) else lease = nil end
    g.lease_ms, g.lease_until_ms = lease, lease and now_ms + lease
  elseif op == 'lapse' then
    if not (g.lease_until_ms and g.lease_until_ms <= now_ms) then return {'same', state_reply(id, st)} end
    todo[3], g.owner, g.lease_ms, g.lease_until_ms = 'pending', nil, nil, nil
  elseif not held then
    return {'not_held', g.owner or '', todo[3]}
  elseif op == 'release' then
    todo[3], g.owner, g.lease_ms, g.lease_until_ms = 'pending', nil, nil, nil
  else  -- renew
    local duration = g.lease_ms
    if lease ~= '' then duration = tonumber(lease) end
    if not duration then return {'same', state_reply(id, st)} end
    g.lease_ms, g.lease_until_ms = duration, now_ms + duration
  end
  if not next(g) then todo[6] = nil end
  local encoded = encode_todo(todo)
  redis.call('LSET', todos, position - 1, encoded)
  redis.call('HSET', ids, todo[1], encoded)
  st.bytes = st.bytes - old_bytes + todo_bytes(todo)
  kind, todo_id, index = 'todo_updated', todo[1], position - 1
  if op == 'claim' then added = encoded end  -- what a retried request id answers with
elseif op == 'session' then
  local labels = cjson.decode(st.labels)
  local changed = false
  for k, v in pairs(cjson.decode(ARGV[5])) do
    if labels[k] ~= v then labels[k], changed = v, true end
  end
  for _, k in ipairs(cjson.decode(ARGV[6])) do
    if labels[k] ~= nil then labels[k], changed = nil, true end
  end
  local count = 0
  for _ in pairs(labels) do count = count + 1 end
  if count > MAX_LABELS then return {'too_many_labels'} end
  if ARGV[7] ~= '' and tonumber(ARGV[7]) ~= tonumber(st.ttl) then st.ttl, changed = ARGV[7], true end
  if not changed then return {'same', state_reply(id, st)} end
  st.labels = object(labels)
  kind = 'session_updated'
else
  return redis.error_reply('unknown operation ' .. op)
end

st.rev = st.rev + 1
st.updated = now
save(id, st)
local behind = missed(current_cursor() + 1)
local entry_head = head(id, kind, st.rev, todo_id, origin, '', st)
local list_json
if values then list_json = '[' .. table.concat(values, ',') .. ']' else list_json = todos_json(id) end
local entry, cursor = publish(entry_head, list_json)
if HISTORY > 0 then
  redis.call('RPUSH', key('h', id), entry)
  redis.call('LTRIM', key('h', id), -HISTORY, -1)
end
if added and request_id ~= '' then
  redis.call('HSET', key('q', id), request_id,
    '[' .. added .. ',' .. int(index) .. ',' .. int(st.rev) .. ',' .. str(fingerprint) .. ']')
  redis.call('ZADD', key('qr', id), st.rev, request_id)
  redis.call('ZADD', key('qt', id), now, request_id)
end
-- Request ids are forgotten once both REQUEST_RETENTION_WRITES writes and _SECONDS old.
while true do
  local oldest = redis.call('ZRANGE', key('qr', id), 0, 0, 'WITHSCORES')
  if #oldest == 0 or tonumber(oldest[2]) >= st.rev - REQUEST_RETENTION_WRITES
    or tonumber(redis.call('ZSCORE', key('qt', id), oldest[1])) >= tonumber(now) - REQUEST_RETENTION_SECONDS then
    break
  end
  redis.call('ZREM', key('qr', id), oldest[1])
  redis.call('ZREM', key('qt', id), oldest[1])
  redis.call('HDEL', key('q', id), oldest[1])
end
wake(entry)
if op == 'replace' then entry = string.format('[%d', cursor) .. entry_head .. 'null]' end
return {'ok', entry, index, behind}
