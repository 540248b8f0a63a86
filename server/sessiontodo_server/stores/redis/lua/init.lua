-- Open a store: its feed epoch, and the global list (carried over from 0.1's layout when given).
-- ARGV[3] an epoch for a new store; ARGV[4] the global list's revision ('' : new), ARGV[5] its
-- encoded todos one per line. Returns {epoch, cursor, 1 if the global list was created now}.
redis.call('HSETNX', key('counters'), 'epoch', ARGV[3])
index_tenants()
local created = 0
if redis.call('EXISTS', key('s', GLOBAL)) == 0 then
  created = 1
  local st = {rev = tonumber(ARGV[4]) or tonumber(redis.call('HGET', key('counters'), 'floor') or '0'),
    parent = '', labels = '{}', created = '0.0', updated = '0.0', ttl = '0.0', bytes = 0}
  for encoded in string.gmatch(ARGV[5], '[^\n]+') do
    local todo = cjson.decode(encoded)
    redis.call('RPUSH', key('t', GLOBAL), encoded)
    redis.call('HSET', key('i', GLOBAL), todo[1], encoded)
    st.bytes = st.bytes + todo_bytes(todo)
  end
  save(GLOBAL, st)
  redis.call('ZADD', key('sessions'), 0, GLOBAL)
end
return {redis.call('HGET', key('counters'), 'epoch'), current_cursor(), created}
