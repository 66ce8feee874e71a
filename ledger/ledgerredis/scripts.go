package ledgerredis

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the server and touches the keys
// of one bucket only (one hash slot): KEYS[1] the record, KEYS[2] the
// bucket's pending index, KEYS[3] the bucket's index of all records.
// ARGV[1] is the action key (the member in both indexes) and ARGV[2] the
// store's clock in Unix milliseconds.
//
// Record fields (a hash): t tool, u run id, s state, o owner, l lease until
// (ms), e expires at (ms), f fingerprint, a attempt, at attempt at (ms),
// m summary, r ref, x result, z truncated ("1"), n reason, w updated at (ms).

// The functions the scripts share; each script takes those it uses.
const (
	luaGone = `
-- gone: the record counts as absent: it is settled and its retention has
-- run out. A pending record never expires (ledger.Record.Expired).
local function gone(s, e, now)
  return s ~= 'pending' and now >= e
end
`
	luaKeep = `
-- outlive makes index key k live at least ttl ms, so that the indexes of
-- a ledger no longer written go with its records.
local function outlive(k, ttl)
  local cur = redis.call('PTTL', k)
  if cur == -1 or (cur >= 0 and cur < ttl) then redis.call('PEXPIRE', k, ttl) end
end

-- keep sets the record's TTL and its place in the bucket's indexes. A
-- pending record is kept for grace ms beyond its retention and its lease,
-- so that a claim after both still sees it and takes it over; a settled one
-- until a minute after its retention ends, so that a host whose clock is
-- behind the writer's still reads a record that has not expired by its own
-- clock (readers apply expiry from the fields). The indexes live as long as
-- their longest-lived record: settling a record never lengthens its life,
-- so only pending records (claims, extensions) raise their TTL.
local function keep(s, l, e, now, grace)
  local d = e + 60000
  if s == 'pending' then
    d = math.max(e, l, now) + grace
    redis.call('ZADD', KEYS[2], l, ARGV[1])
    outlive(KEYS[2], d - now)
  else
    redis.call('ZREM', KEYS[2], ARGV[1])
  end
  if d <= now then d = now + 1 end
  redis.call('PEXPIRE', KEYS[1], d - now)
  redis.call('ZADD', KEYS[3], d, ARGV[1])
  if s == 'pending' then outlive(KEYS[3], d - now) end
end
`
	luaToMap = `
local function tomap(flat)
  local r = {}
  for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end
  return r
end
`
	luaOwned = `
-- owned returns the record's lease and expiry when it is pending and
-- owned by ARGV[3]; nil otherwise.
local function owned()
  local r = redis.call('HMGET', KEYS[1], 's', 'o', 'l', 'e')
  if r[1] ~= 'pending' or r[2] ~= ARGV[3] then return nil end
  return tonumber(r[3]), tonumber(r[4])
end
`
)

// claimScript: ARGV[3] owner, [4] lease until, [5] expires at, [6] tool,
// [7] run id, [8] fingerprint, [9] grace (ms). Returns {1, attempt,
// attempt at, previous} when claimed (previous: the flat hash taken over,
// or empty) and {0, blocking} otherwise.
var claimScript = redis.NewScript(luaGone + luaKeep + luaToMap + `
local now = tonumber(ARGV[2])
local prev = redis.call('HGETALL', KEYS[1])
local attempt, attemptAt = '1', ARGV[2]
if #prev > 0 then
  local r = tomap(prev)
  local l = tonumber(r.l)
  if not gone(r.s, tonumber(r.e), now) then
    local ok = r.s == 'failed' or
      (r.f == ARGV[8] and (r.s == 'uncertain' or (r.s == 'pending' and now >= l)))
    if not ok then return {0, prev} end
    attempt, attemptAt = r.a, r.at
  else
    prev = {}
  end
  redis.call('DEL', KEYS[1])
end
-- Drop from the index of all records those whose keys have gone.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[2])
redis.call('HSET', KEYS[1], 't', ARGV[6], 'u', ARGV[7], 's', 'pending', 'o', ARGV[3],
  'l', ARGV[4], 'e', ARGV[5], 'f', ARGV[8], 'a', attempt, 'at', attemptAt, 'w', ARGV[2])
keep('pending', tonumber(ARGV[4]), tonumber(ARGV[5]), now, tonumber(ARGV[9]))
return {1, attempt, attemptAt, prev}
`)

// completeScript: ARGV[3] owner, [4] summary, [5] ref, [6] result,
// [7] truncated ("1" or "0"), [8] grace. Returns 1, or 0 when not owner.
var completeScript = redis.NewScript(luaOwned + luaKeep + `
local now = tonumber(ARGV[2])
local l, e = owned()
if not l then return 0 end
redis.call('HSET', KEYS[1], 's', 'done', 'l', ARGV[2], 'm', ARGV[4], 'r', ARGV[5],
  'x', ARGV[6], 'z', ARGV[7], 'w', ARGV[2])
keep('done', now, e, now, tonumber(ARGV[8]))
return 1
`)

// failScript: ARGV[3] owner, [4] reason, [5] definite ("1" or "0"),
// [6] grace. Returns 1, or 0 when not owner.
var failScript = redis.NewScript(luaOwned + luaKeep + `
local now = tonumber(ARGV[2])
local l, e = owned()
if not l then return 0 end
local s = 'uncertain'
if ARGV[5] == '1' then
  s = 'failed'
  redis.call('HINCRBY', KEYS[1], 'a', 1)
  redis.call('HSET', KEYS[1], 'at', ARGV[2])
end
redis.call('HSET', KEYS[1], 's', s, 'l', ARGV[2], 'n', ARGV[4], 'w', ARGV[2])
keep(s, now, e, now, tonumber(ARGV[6]))
return 1
`)

// extendScript: ARGV[3] owner, [4] new lease until, [5] grace. The
// retention is raised to the new lease end when it is sooner. Returns 1,
// or 0 when not owner.
var extendScript = redis.NewScript(luaOwned + luaKeep + `
local now = tonumber(ARGV[2])
local l, e = owned()
if not l then return 0 end
l = tonumber(ARGV[4])
if l > e then
  e = l
  redis.call('HSET', KEYS[1], 'e', ARGV[4])
end
redis.call('HSET', KEYS[1], 'l', ARGV[4], 'w', ARGV[2])
keep('pending', l, e, now, tonumber(ARGV[5]))
return 1
`)

// listScript reads one page of one bucket's index KEYS[1] (the pending
// index scored by lease, or the index of all records scored by when their
// key goes). ARGV[1] the records' key prefix, [2] now, [3] state or "",
// [4] run id or "", [5] lease before (ms) or "", [6] limit, [7] offset,
// [8] page size, [9] "p" for the pending index. It drops index entries
// whose record is gone. Returns {next offset or -1, key, flat hash, ...}.
var listScript = redis.NewScript(luaGone + luaToMap + `
local now = tonumber(ARGV[2])
local lb = tonumber(ARGV[5])
local min, max = '(' .. ARGV[2], '+inf'
if ARGV[9] == 'p' then
  min = '-inf'
  if lb then max = '(' .. ARGV[5] end
end
local limit, off, page = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local members = redis.call('ZRANGEBYSCORE', KEYS[1], min, max, 'LIMIT', off, page)
local out, found, removed = {-1}, 0, 0
for i, m in ipairs(members) do
  local flat = redis.call('HGETALL', ARGV[1] .. m)
  if #flat == 0 then
    redis.call('ZREM', KEYS[1], m)
    removed = removed + 1
  else
    local r = tomap(flat)
    local l = tonumber(r.l)
    if not gone(r.s, tonumber(r.e), now) and (ARGV[3] == '' or r.s == ARGV[3]) and
      (ARGV[4] == '' or r.u == ARGV[4]) and (not lb or l < lb) then
      out[#out + 1] = m
      out[#out + 1] = flat
      found = found + 1
      if found >= limit then
        out[1] = off + i - removed
        return out
      end
    end
  end
end
if #members == page then out[1] = off + #members - removed end
return out
`)
