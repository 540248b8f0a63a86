-- Open a store: its feed epoch, and the global list (carried over from 0.1's layout when given).
-- ARGV[6] an epoch for a new store; ARGV[7] the global list's revision ('' : new), ARGV[8] its
-- byte count, ARGV[9] n, then n todo ids and n encoded todos. Returns {epoch, cursor}.
redis.call('HSETNX', key('counters'), 'epoch', ARGV[6])
if redis.call('EXISTS', key('s', GLOBAL)) == 0 then
  local n = tonumber(ARGV[9])
  local st = {rev = tonumber(ARGV[7]) or tonumber(redis.call('HGET', key('counters'), 'floor') or '0'),
    parent = '', labels = '{}', created = '0.0', updated = '0.0', ttl = '0.0', bytes = tonumber(ARGV[8])}
  save(GLOBAL, st)
  redis.call('ZADD', key('sessions'), 0, GLOBAL)
  for i = 1, n do
    redis.call('RPUSH', key('t', GLOBAL), ARGV[9 + n + i])
    redis.call('HSET', key('i', GLOBAL), ARGV[9 + i], ARGV[9 + n + i])
  end
end
return {redis.call('HGET', key('counters'), 'epoch'), current_cursor()}
