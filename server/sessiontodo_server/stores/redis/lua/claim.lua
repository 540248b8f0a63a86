-- Sessions whose idle TTL has run out at ARGV[6]; each is claimed for ARGV[7] seconds (its
-- deadline moved on), so that replicas reaping at once share the work and an interrupted
-- reaper's sessions come due again. At most ARGV[8] ids.
local due = redis.call('ZRANGEBYSCORE', key('deadlines'), '-inf', ARGV[6], 'LIMIT', 0, tonumber(ARGV[8]))
for _, id in ipairs(due) do
  redis.call('ZADD', key('deadlines'), tonumber(ARGV[6]) + tonumber(ARGV[7]), id)
end
return due
