-- Sessions whose idle TTL has run out at ARGV[3]; each is claimed for ARGV[4] seconds (its
-- deadline moved on), so that replicas reaping at once share the work and an interrupted
-- reaper's sessions come due again. At most ARGV[5] ids.
local due = redis.call('ZRANGEBYSCORE', key('deadlines'), '-inf', ARGV[3], 'LIMIT', 0, tonumber(ARGV[5]))
for _, id in ipairs(due) do
  redis.call('ZADD', key('deadlines'), tonumber(ARGV[3]) + tonumber(ARGV[4]), id)
end
return due
