-- Remove a session and its descendants (ARGV[3] the id; '' every session but the global list).
-- ARGV[4] the reason; ARGV[5] ('' : none) fences an expiry: the session is removed only if its
-- idle TTL has run out at that time (another replica's write may have renewed it); ARGV[6] the
-- origin.
-- {missed, {removal entries}}.
local doomed = {}
if ARGV[3] == '' then
  for _, id in ipairs(redis.call('ZRANGE', key('sessions'), 0, -1)) do
    if id ~= GLOBAL then doomed[#doomed + 1] = id end
  end
else
  local st = load(ARGV[3])
  if not st then return {{0}, {}} end
  if ARGV[5] ~= '' then
    local ttl = tonumber(st.ttl)
    if ttl <= 0 or tonumber(st.updated) + ttl > tonumber(ARGV[5]) then return {{0}, {}} end
  end
  doomed[1] = ARGV[3]
  local i = 1
  while i <= #doomed do  -- grows while walked: breadth first, children in id order
    local id = doomed[i]
    for _, pair in ipairs(redis.call('ZRANGEBYLEX', key('children'), '[' .. id .. ' ', '(' .. id .. '!')) do
      doomed[#doomed + 1] = string.sub(pair, #id + 2)
    end
    i = i + 1
  end
end
local behind = missed(current_cursor() + 1)
local removals = {}
for _, id in ipairs(doomed) do
  local st = load(id)
  local removed_at = st.rev + 1
  removals[#removals + 1] = publish(head(id, 'session_removed', removed_at, '', ARGV[6], ARGV[4], st), '[]')
  redis.call('DEL', key('s', id), key('t', id), key('i', id), key('h', id), key('q', id), key('qr', id),
    key('qt', id))
  redis.call('ZREM', key('sessions'), id)
  redis.call('ZREM', tenant_index(tenant_of(id)), id)
  redis.call('ZREM', key('deadlines'), id)
  if st.parent ~= '' then redis.call('ZREM', key('children'), st.parent .. ' ' .. id) end
  redis.call('ZADD', key('marks'), removed_at + 1, id)
end
-- Too many marks: the lowest are folded into the floor every new session starts from.
local excess = redis.call('ZCARD', key('marks')) - REMOVED_MARKS
if excess > 0 then
  local floor = tonumber(redis.call('HGET', key('counters'), 'floor') or '0')
  local popped = redis.call('ZPOPMIN', key('marks'), excess)
  for i = 2, #popped, 2 do floor = math.max(floor, tonumber(popped[i])) end
  redis.call('HSET', key('counters'), 'floor', int(floor))
end
if #removals > 0 then wake() end
return {behind, removals}
