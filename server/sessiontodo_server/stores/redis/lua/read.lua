-- Sessions' states, read together. ARGV[6..] ids. One state (or 0 for a missing id) per id.
local out = {}
for i = 3, #ARGV do
  local st = load(ARGV[i])
  out[#out + 1] = st and state_reply(ARGV[i], st) or 0
end
return out
