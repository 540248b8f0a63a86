-- A replica following the feed says it is alive (ARGV[3] '1') or leaving (''), and forgets
-- replicas silent for too long. Other replicas' writes wake it while it is registered.
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREMRANGEBYSCORE', key('replicas'), '-inf', now - REPLICA_TIMEOUT)
if ARGV[3] == '1' then
  redis.call('ZADD', key('replicas'), now, WRITER)
else
  redis.call('ZREM', key('replicas'), WRITER)
end
return now
