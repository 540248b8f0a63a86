-- Shared by every script (prepended when the scripts are loaded). ARGV[1] is the store's
-- configuration, one line each: the key prefix with its hash tag (every key of a store lives in
-- one cluster slot), this replica's writer id, the feed's length, the size up to which a feed
-- entry carries its list, the length of a session's history. ARGV[2] is the feed cursor this
-- replica has delivered up to. A script's own arguments start at ARGV[3].

local CONFIG = {}
for line in string.gmatch(ARGV[1], '[^\n]+') do CONFIG[#CONFIG + 1] = line end
local BASE, WRITER, FEED_LENGTH = CONFIG[1], CONFIG[2], CONFIG[3]
local INLINE_BYTES, HISTORY = tonumber(CONFIG[4]), tonumber(CONFIG[5])
local DELIVERED = tonumber(ARGV[2])
local GLOBAL = 'sessiontodo:global'
local REQUEST_RETENTION_WRITES = 10000  -- as stores/base.py says
local REQUEST_RETENTION_SECONDS = 3600
local REMOVED_MARKS = 100000
local REPLICA_TIMEOUT = 30  -- seconds a replica that stopped sending heartbeats is still woken

local function key(kind, id)
  if id then return BASE .. kind .. ':' .. id end
  return BASE .. kind
end

-- JSON exactly as Python's json.dumps(ensure_ascii=False, separators=(',', ':')) writes it.
local ESCAPES = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n', ['\r'] = '\\r',
  ['\t'] = '\\t'}
local function escape(c) return ESCAPES[c] or string.format('\\u%04x', string.byte(c)) end
local function str(s) return '"' .. (string.gsub(s, '[%z\1-\31\\"]', escape)) .. '"' end

local function bytewise(a, b)  -- Python's order of str keys (the C locale's, whatever Redis's locale)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function object(t)  -- a JSON object of strings, keys sorted
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, bytewise)
  for i, k in ipairs(keys) do keys[i] = str(k) .. ':' .. str(t[k]) end
  return '{' .. table.concat(keys, ',') .. '}'
end

local function int(n) return string.format('%d', n) end

-- A todo's task-graph fields, as stores/codec.py encodes them: the keys set, in sorted order.
local function graph_object(g)
  local out = {}
  if g.active_form then out[#out + 1] = '"active_form":' .. str(g.active_form) end
  if g.blocked_by then
    local ids = {}
    for i, blocker in ipairs(g.blocked_by) do ids[i] = str(blocker) end
    out[#out + 1] = '"blocked_by":[' .. table.concat(ids, ',') .. ']'
  end
  if g.description then out[#out + 1] = '"description":' .. str(g.description) end
  if g.lease_ms then out[#out + 1] = '"lease_ms":' .. int(g.lease_ms) end
  if g.lease_until_ms then out[#out + 1] = '"lease_until_ms":' .. int(g.lease_until_ms) end
  if g.owner then out[#out + 1] = '"owner":' .. str(g.owner) end
  return '{' .. table.concat(out, ',') .. '}'
end

-- {id, content, status, priority, metadata, graph} as stores/codec.py encodes it
local function encode_todo(t)
  local out = '[' .. str(t[1]) .. ',' .. str(t[2]) .. ',' .. str(t[3]) .. ',' .. str(t[4])
  if t[6] and next(t[6]) then
    out = out .. ',' .. object(t[5] or {}) .. ',' .. graph_object(t[6])
  elseif t[5] and next(t[5]) then
    out = out .. ',' .. object(t[5])
  end
  return out .. ']'
end

local function chars(s)  -- code points of UTF-8 text, as Python's len()
  local _, n = string.gsub(s, '[^\128-\191]', '')
  return n
end

local function entries_bytes(t)
  local n = 0
  for k, v in pairs(t) do n = n + #k + #v end
  return n
end

local function graph_bytes(g)  -- the task-graph fields' share of todos.todo_bytes
  local n = #(g.description or '') + #(g.active_form or '') + #(g.owner or '')
  for _, blocker in ipairs(g.blocked_by or {}) do n = n + chars(blocker) end
  return n
end

local function todo_bytes(t)  -- what todos.todo_bytes counts
  return #t[2] + chars(t[1]) + (t[5] and entries_bytes(t[5]) or 0) + (t[6] and graph_bytes(t[6]) or 0)
end

local function load(id)
  local v = redis.call('HMGET', key('s', id), 'rev', 'parent', 'labels', 'created', 'updated', 'ttl', 'bytes')
  if not v[1] then return nil end
  return {rev = tonumber(v[1]), parent = v[2], labels = v[3], created = v[4], updated = v[5], ttl = v[6],
    bytes = tonumber(v[7])}
end

local function todos_json(id)
  return '[' .. table.concat(redis.call('LRANGE', key('t', id), 0, -1), ',') .. ']'
end

local function state_reply(id, st)
  return {int(st.rev), st.parent, st.labels, st.created, st.updated, st.ttl, todos_json(id)}
end

local function save(id, st)
  redis.call('HSET', key('s', id), 'rev', int(st.rev), 'parent', st.parent, 'labels', st.labels,
    'created', st.created, 'updated', st.updated, 'ttl', st.ttl, 'bytes', int(st.bytes))
  if tonumber(st.ttl) > 0 then
    redis.call('ZADD', key('deadlines'), tonumber(st.updated) + tonumber(st.ttl), id)
  else
    redis.call('ZREM', key('deadlines'), id)
  end
end

-- One change, as a feed and history entry:
-- [cursor, session id, kind, revision, todo id, origin, reason, [parent, labels, created, updated, ttl], todos]
local function head(id, kind, revision, todo_id, origin, reason, st)
  return ',' .. str(id) .. ',' .. str(kind) .. ',' .. int(revision) .. ',' .. str(todo_id)
    .. ',' .. str(origin) .. ',' .. str(reason) .. ',[' .. str(st.parent) .. ',' .. st.labels .. ','
    .. st.created .. ',' .. st.updated .. ',' .. st.ttl .. '],'
end

-- The tenant of a stored session id (what comes before its last '/'; '' for the default tenant).
local function tenant_of(id) return string.match(id, '^(.*)/[^/]*$') or '' end

local function is_global(id) return id == GLOBAL or string.sub(id, -#GLOBAL - 1) == '/' .. GLOBAL end

-- Each tenant's sessions, its global list left out (``keys.py``): a tenant's listings, feed
-- snapshots and session quota read this index, never other tenants' sessions.
local function tenant_index(tenant) return key('tenant', tenant) end

-- Build the tenant indexes of a store written before they existed, once.
local function index_tenants()
  if redis.call('HGET', key('counters'), 'tenants') == '1' then return end
  for _, id in ipairs(redis.call('ZRANGE', key('sessions'), 0, -1)) do
    if not is_global(id) then redis.call('ZADD', tenant_index(tenant_of(id)), 0, id) end
  end
  redis.call('HSET', key('counters'), 'tenants', '1')
end

local function current_cursor() return tonumber(redis.call('HGET', key('counters'), 'cursor') or '0') end

-- Append a change to the feed under the next cursor; a list too large for the feed is left
-- out (null): readers take it from the session's history. Returns the whole entry and its cursor.
local function publish(entry_head, todos)
  local cursor = redis.call('HINCRBY', key('counters'), 'cursor', 1)
  local whole = string.format('[%d', cursor) .. entry_head .. todos .. ']'
  local feed_entry = whole
  if #whole > INLINE_BYTES then feed_entry = string.format('[%d', cursor) .. entry_head .. 'null]' end
  redis.call('XADD', key('feed'), 'MAXLEN', FEED_LENGTH, int(cursor) .. '-0', 'c', feed_entry)
  return whole, cursor
end

-- The feed entries this replica has not delivered yet, before the write it is making (whose
-- first cursor is ``first``): {0, entries...}, or {1} when there are too many to return here.
local function missed(first)
  local delivered = DELIVERED
  local count = first - 1 - delivered
  if delivered < 0 or count <= 0 then return {0} end
  if count > 256 then return {1} end
  local out = {0}
  for _, e in ipairs(redis.call('XRANGE', key('feed'), int(delivered + 1) .. '-0', int(first - 1) .. '-0')) do
    out[#out + 1] = e[2][2]
  end
  return out
end

-- Wake the other replicas following the feed (each listens on a channel of its own, so a
-- replica is never woken by its own writes). The wake-up carries the entry of a single change
-- small enough (else ''), which a replica that delivered everything before it delivers as is.
local function wake(entry)
  if not entry or #entry > INLINE_BYTES then entry = '' end
  local now = tonumber(redis.call('TIME')[1])
  for _, replica in ipairs(redis.call('ZRANGEBYSCORE', key('replicas'), now - REPLICA_TIMEOUT, '+inf')) do
    if replica ~= WRITER then redis.call('PUBLISH', key('wake', replica), entry) end
  end
end
