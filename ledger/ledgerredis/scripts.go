package ledgerredis

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the server, touches the keys
// of one bucket only (one hash slot), and only keys it declares (KEYS), as
// a cluster requires. The write scripts take KEYS[1] the
// record, KEYS[2] the bucket's pending index, KEYS[3] the bucket's index of
// all records, KEYS[4], [5] and [6] its uncertain, done and failed indexes;
// ARGV[1] is the action key (the member of the indexes) and ARGV[2] the
// store's clock in Unix milliseconds.
//
// Record fields (a hash): t tool, u run id, s state, o owner, l lease until
// (ms), e expires at (ms), f fingerprint, a attempt, at attempt at (ms),
// m summary, r ref, x result, z truncated ("1"), n reason, w updated at (ms),
// k watched ("1": a Store waits for its settle, see markScript).

// The functions the scripts share; each script takes those it uses.
const (
	luaGone = `
-- gone: the record counts as absent: it is done or failed and its
-- retention has run out. A pending or uncertain record never expires
-- (ledger.Record.Expired).
local function gone(s, e, now)
  return (s == 'done' or s == 'failed') and now >= e
end
`
	luaKeep = `
-- uncertainKeep (a century, in ms) is how long an uncertain record is
-- kept: it never expires (ledger.Record.Expired), until a claim or an
-- operator settles it.
local uncertainKeep = 3155760000000
-- outlive makes index key k live at least ttl ms, so that the indexes of
-- a ledger no longer written go with its records.
local function outlive(k, ttl)
  local cur = redis.call('PTTL', k)
  if cur == -1 or (cur >= 0 and cur < ttl) then redis.call('PEXPIRE', k, ttl) end
end

-- The index of each state: its records by lease end (LeaseUntil), so that
-- List reads the records of a state, and only those, in cursor order.
local stateIndex = {pending = 2, uncertain = 4, done = 5, failed = 6}

-- prune drops from the indexes at most pruneBatch records whose keys
-- have gone (the index of all records is scored by when a key goes), so
-- that a write after a quiet period does not hold the server for long:
-- each write of a bucket trims a little, Store.Purge the rest in bounded
-- steps.
local pruneBatch = 64
local function prune(now)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now, 'LIMIT', 0, pruneBatch)
  if #dead == 0 then return end
  for _, i in pairs(stateIndex) do redis.call('ZREM', KEYS[i], unpack(dead)) end
  redis.call('ZREM', KEYS[3], unpack(dead))
end

-- keep sets the record's TTL and its place in the bucket's indexes. An
-- uncertain record is kept for uncertainKeep; a pending record is kept for grace ms beyond its retention and its lease,
-- so that a claim after both still sees it and takes it over; a settled one
-- until a minute after its retention ends, so that a host whose clock is
-- behind the writer's still reads a record that has not expired by its own
-- clock (readers apply expiry from the fields). An index lives as long as
-- its longest-lived record.
local function keep(s, l, e, now, grace)
  local d = e + 60000
  if s == 'pending' then d = math.max(e, l, now) + grace end
  if s == 'uncertain' then d = now + uncertainKeep end
  if d <= now then d = now + 1 end
  for st, i in pairs(stateIndex) do
    if st == s then
      redis.call('ZADD', KEYS[i], l, ARGV[1])
      outlive(KEYS[i], d - now)
    else
      redis.call('ZREM', KEYS[i], ARGV[1])
    end
  end
  redis.call('PEXPIRE', KEYS[1], d - now)
  redis.call('ZADD', KEYS[3], d, ARGV[1])
  outlive(KEYS[3], d - now)
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
// [7] run id, [8] fingerprint, [9] grace (ms), [10] the owner token of a
// pending record known to have exited ("" for none). Returns {1, attempt,
// attempt at, previous} when claimed (previous: the flat hash taken over,
// or empty) and {0, blocking} otherwise.
var claimScript = redis.NewScript(luaGone + luaKeep + luaToMap + `
local now = tonumber(ARGV[2])
local prev = redis.call('HGETALL', KEYS[1])
local attempt, attemptAt = '1', ARGV[2]
local watched = nil
if #prev > 0 then
  local r = tomap(prev)
  local l = tonumber(r.l)
  if not gone(r.s, tonumber(r.e), now) then
    local ok = r.s == 'failed' or
      (r.f == ARGV[8] and (r.s == 'uncertain' or (r.s == 'pending' and r.o ~= ARGV[3] and (now >= l or r.o == ARGV[10]))))
    if not ok then return {0, prev} end
    attempt, attemptAt, watched = r.a, r.at, r.k
    -- Over a failed record the attempt begins with this claim (see
    -- ledger.Reclaimed).
    if r.s == 'failed' then attemptAt = ARGV[2] end
  else
    prev = {}
  end
  redis.call('DEL', KEYS[1])
end
prune(ARGV[2])
redis.call('HSET', KEYS[1], 't', ARGV[6], 'u', ARGV[7], 's', 'pending', 'o', ARGV[3],
  'l', ARGV[4], 'e', ARGV[5], 'f', ARGV[8], 'a', attempt, 'at', attemptAt, 'w', ARGV[2])
-- A record taken over stays watched: its waiters still wait.
if watched then redis.call('HSET', KEYS[1], 'k', watched) end
keep('pending', tonumber(ARGV[4]), tonumber(ARGV[5]), now, tonumber(ARGV[9]))
return {1, attempt, attemptAt, prev}
`)

// completeScript: ARGV[3] owner, [4] summary, [5] ref, [6] result,
// [7] truncated ("1" or "0"), [8] grace, [9] retention from now (ms; 0:
// the claim's expiry), [10] the channel its settle is published on when
// the record is watched (the record's key as the message; Store.Watch).
// Returns 1, or 0 when not owner.
var completeScript = redis.NewScript(luaOwned + luaKeep + `
local now = tonumber(ARGV[2])
local l, e = owned()
if not l then return 0 end
prune(ARGV[2])
if tonumber(ARGV[9]) > 0 then e = now + tonumber(ARGV[9]) end
redis.call('HSET', KEYS[1], 's', 'done', 'l', ARGV[2], 'm', ARGV[4], 'r', ARGV[5],
  'x', ARGV[6], 'z', ARGV[7], 'w', ARGV[2], 'e', e)
keep('done', now, e, now, tonumber(ARGV[8]))
if redis.call('HEXISTS', KEYS[1], 'k') == 1 then redis.call('PUBLISH', ARGV[10], ARGV[1]) end
return 1
`)

// failScript: ARGV[3] owner, [4] reason, [5] definite ("1" or "0"),
// [6] grace, [7] retention of a failed record from now (ms; 0: the
// claim's expiry), [8] the channel its settle is published on when the
// record is watched. Returns 1, or 0 when not owner.
var failScript = redis.NewScript(luaOwned + luaKeep + `
local now = tonumber(ARGV[2])
local l, e = owned()
if not l then return 0 end
prune(ARGV[2])
local s = 'uncertain'
if ARGV[5] == '1' then
  s = 'failed'
  if tonumber(ARGV[7]) > 0 then e = now + tonumber(ARGV[7]) end
  redis.call('HINCRBY', KEYS[1], 'a', 1)
  redis.call('HSET', KEYS[1], 'at', ARGV[2], 'e', e)
end
redis.call('HSET', KEYS[1], 's', s, 'l', ARGV[2], 'n', ARGV[4], 'w', ARGV[2])
keep(s, now, e, now, tonumber(ARGV[6]))
if redis.call('HEXISTS', KEYS[1], 'k') == 1 then redis.call('PUBLISH', ARGV[8], ARGV[1]) end
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

// luaAfter finds the rank at which a walk of a sorted set resumes after
// the position (score, member), given as the strings of the arguments:
// the rank after the member when it is still there with that score; else,
// as entries of one score sort by member (bytewise), the rank of the first
// entry of that score whose member sorts after it (a binary search), or
// of the first entry of a higher score. It never reads an entry twice,
// however many entries share a score.
const luaAfter = `
local function bytesLE(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end
local function after(key, score, member)
  if score == '' then return 0 end
  local sc = redis.call('ZSCORE', key, member)
  if sc and tonumber(sc) == tonumber(score) then return redis.call('ZRANK', key, member) + 1 end
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', key, '-inf', score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if bytesLE(redis.call('ZRANGE', key, mid, mid)[1], member) then lo = mid + 1 else hi = mid end
  end
  return lo
end
`

// listScanScript reads one page of one state's index KEYS[1] (scored by
// lease end) after a cursor, without reading the records: a script reads
// only the keys it declares, as a cluster requires, and the client reads
// the records (pipelined). ARGV[1] lease before (ms) or "", [2] the
// cursor's lease end (ms) or "" for none, [3] its key, [4] the entries to
// read at most. Returns {done (1: nothing after what was read), lease and
// key of the last entry read (or the cursor), key, lease, ...}.
var listScanScript = redis.NewScript(luaAfter + `
local lb = tonumber(ARGV[1])
local page = tonumber(ARGV[4])
local start = after(KEYS[1], ARGV[2], ARGV[3])
local entries = redis.call('ZRANGE', KEYS[1], start, start + page - 1, 'WITHSCORES')
local out = {0, ARGV[2], ARGV[3]}
for i = 1, #entries, 2 do
  local m, l = entries[i], tonumber(entries[i + 1])
  if lb and l >= lb then
    out[1] = 1
    return out
  end
  local ls = string.format('%.0f', l)
  out[2], out[3] = ls, m
  out[#out + 1] = m
  out[#out + 1] = ls
end
if #entries < 2 * page then out[1] = 1 end
return out
`)

// dropStaleScript drops the action key ARGV[1] from the state index
// KEYS[1] unless its record KEYS[2] is (still, or again) in the state
// ARGV[2]: List found the entry's record gone or in another state.
// Returns 1 when it dropped the entry.
var dropStaleScript = redis.NewScript(`
if redis.call('HGET', KEYS[2], 's') == ARGV[2] then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])
`)

// reindexOneScript puts one record in its state's index; the keys are
// those of the write scripts, ARGV[1] the action key. Returns 1 when the
// record exists.
var reindexOneScript = redis.NewScript(`
local index = {pending = KEYS[2], uncertain = KEYS[4], done = KEYS[5], failed = KEYS[6]}
local r = redis.call('HMGET', KEYS[1], 's', 'l')
if not r[1] then return 0 end
if index[r[1]] then redis.call('ZADD', index[r[1]], r[2], ARGV[1]) end
return 1
`)

// scanScript reads one page of a bucket's index of all records KEYS[1]
// (scored by when a key goes) after a position, up to a score, for Purge
// and the indexing of an older ledger:
// ARGV[1] the score of the last entry read or "", [2] its member, [3] the
// highest score to read, [4] the entries to read at most. Returns {done
// (1: nothing after what was read), score, member of the last entry read,
// the members read...}.
var scanScript = redis.NewScript(luaAfter + `
local start = after(KEYS[1], ARGV[1], ARGV[2])
local page, upTo = tonumber(ARGV[4]), tonumber(ARGV[3])
local entries = redis.call('ZRANGE', KEYS[1], start, start + page - 1, 'WITHSCORES')
local out = {0, ARGV[1], ARGV[2]}
for i = 1, #entries, 2 do
  local m, d = entries[i], tonumber(entries[i + 1])
  if d > upTo then
    out[1] = 1
    return out
  end
  out[2], out[3] = string.format('%.0f', d), m
  out[#out + 1] = m
end
if #entries < 2 * page then out[1] = 1 end
return out
`)

// purgeOneScript deletes one record when it expired at a time, and drops
// it from its bucket's indexes when deleted or gone; the keys are those of
// the write scripts. ARGV[1] the action key, [2] the time (ms). Returns 1
// when it deleted the record, else 0.
var purgeOneScript = redis.NewScript(luaGone + `
local r = redis.call('HMGET', KEYS[1], 's', 'e')
local deleted = 0
if r[1] then
  if not gone(r[1], tonumber(r[2]), tonumber(ARGV[2])) then return 0 end
  redis.call('DEL', KEYS[1])
  deleted = 1
end
for i = 2, 6 do redis.call('ZREM', KEYS[i], ARGV[1]) end
return deleted
`)

// markScript marks the record KEYS[1] watched when it is pending, so that
// its settle is published (Store.Watch). Returns 1 when it marked it.
var markScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 's') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'k', '1')
return 1
`)
