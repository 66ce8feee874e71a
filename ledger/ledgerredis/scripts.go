package ledgerredis

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the server, touches the keys
// of one bucket only (one hash slot), and only keys it declares (KEYS), as
// a cluster requires. The write scripts take KEYS[1] the
// record, KEYS[2] the bucket's pending index, KEYS[3] the bucket's index of
// all records, KEYS[4], [5] and [6] its uncertain, done and failed
// indexes, KEYS[7] the bucket's index of the run the caller expects the
// record to be of (see Store.runKey); ARGV[1] is the action key (the
// member of the indexes) and ARGV[2] the store's clock in Unix
// milliseconds.
//
// Record fields (a hash): t tool, u run id, s state, o owner, l lease until
// (ms), e expires at (ms), f fingerprint, a attempt, at attempt at (ms),
// m summary, r ref, x result, z truncated ("1"), n reason, w updated at (ms),
// k watched ("1": a Store waits for its settle, see markScript). A text
// field (t, u, o, f, m, r, x, n) longer than 64 bytes and at most 512
// (the result x: 4096) is split into 64-byte chunks, the field and then f1, f2, ... (luaChunks),
// so that the hash keeps the server's compact listpack encoding (which
// holds values of up to hash-max-listpack-value bytes, 64 by default);
// an empty text field, x, and z other than "1" are not written. Records
// written before the chunks (one field per value, x and z always) read
// the same.

// The functions the scripts share; each script takes those it uses.
const (
	luaChunks = `
-- put appends field f with value v to the HSET arguments args: nothing
-- when v is empty, one field when v is at most chunk bytes or longer than
-- chunk * (most or maxChunks), else v in chunks of chunk bytes as f, f1,
-- f2, ...
local chunk, maxChunks = 64, 8
local function put(args, f, v, most)
  if v == '' then return end
  if #v <= chunk or #v > chunk * (most or maxChunks) then
    args[#args + 1] = f
    args[#args + 1] = v
    return
  end
  for i = 0, math.ceil(#v / chunk) - 1 do
    local name = f
    if i > 0 then name = f .. i end
    args[#args + 1] = name
    args[#args + 1] = string.sub(v, i * chunk + 1, (i + 1) * chunk)
  end
end
-- join returns the value of field f of the record r (a table of its
-- fields), its chunks joined; nil when it has no f.
local function join(r, f)
  local v = r[f]
  if not v then return nil end
  local i = 1
  while r[f .. i] do
    v = v .. r[f .. i]
    i = i + 1
  end
  return v
end
`
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
-- its longest-lived record. run is the record's run id; its index is
-- KEYS[7].
local function keep(s, l, e, now, grace, run)
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
  -- The run's index (none for a record without a run), by lease end as
  -- the state indexes, so that listing a run reads its records only.
  if run ~= '' then
    redis.call('ZADD', KEYS[7], l, ARGV[1])
    outlive(KEYS[7], d - now)
  end
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
-- owned by ARGV[3]; nil otherwise. When it is, but its run is not ARGV[4]
-- (the run whose index the caller declared as KEYS[7]), it returns the
-- record's run as a third value.
local function owned()
  local r = tomap(redis.call('HGETALL', KEYS[1]))
  if r.s ~= 'pending' or join(r, 'o') ~= ARGV[3] then return nil end
  local u = join(r, 'u') or ''
  if u ~= ARGV[4] then return tonumber(r.l), tonumber(r.e), u end
  return tonumber(r.l), tonumber(r.e), nil
end
`
)

// claimScript: ARGV[3] owner, [4] lease until, [5] expires at, [6] tool,
// [7] run id (KEYS[7] is its index), [8] fingerprint, [9] grace (ms),
// [10] the owner token of a pending record known to have exited ("" for
// none). Returns {1, attempt, attempt at, previous} when claimed
// (previous: the flat hash taken over, or empty) and {0, blocking}
// otherwise.
var claimScript = redis.NewScript(luaGone + luaKeep + luaToMap + luaChunks + `
local now = tonumber(ARGV[2])
local prev = redis.call('HGETALL', KEYS[1])
local attempt, attemptAt = '1', ARGV[2]
local watched = nil
if #prev > 0 then
  local r = tomap(prev)
  local l = tonumber(r.l)
  if not gone(r.s, tonumber(r.e), now) then
    local fp = join(r, 'f') or ''
    local ok = r.s == 'failed' or
      (fp == ARGV[8] and (r.s == 'uncertain' or (r.s == 'pending' and join(r, 'o') ~= ARGV[3] and (now >= l or join(r, 'o') == ARGV[10]))))
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
local args = {'s', 'pending', 'l', ARGV[4], 'e', ARGV[5], 'a', attempt, 'at', attemptAt, 'w', ARGV[2]}
put(args, 't', ARGV[6])
put(args, 'u', ARGV[7])
put(args, 'o', ARGV[3])
put(args, 'f', ARGV[8])
-- A record taken over stays watched: its waiters still wait.
if watched then
  args[#args + 1] = 'k'
  args[#args + 1] = watched
end
redis.call('HSET', KEYS[1], unpack(args))
keep('pending', tonumber(ARGV[4]), tonumber(ARGV[5]), now, tonumber(ARGV[9]), ARGV[7])
return {1, attempt, attemptAt, prev}
`)

// The owner-conditional scripts (complete, fail, extend) take ARGV[3] the
// owner and ARGV[4] the run whose index KEYS[7] is, and return 1 when
// written, 0 when not owner, and {2, run} when the record is the caller's
// but of another run than ARGV[4] (nothing written: the caller runs the
// script again with that run's index).

// completeScript: ARGV[5] summary, [6] ref, [7] result, [8] truncated
// ("1" or "0"), [9] grace, [10] retention from now (ms; 0: the claim's
// expiry), [11] the channel its settle is published on when the record is
// watched (the record's key as the message; Store.Watch).
var completeScript = redis.NewScript(luaToMap + luaChunks + luaOwned + luaKeep + `
local now = tonumber(ARGV[2])
local l, e, other = owned()
if not l then return 0 end
if other then return {2, other} end
prune(ARGV[2])
if tonumber(ARGV[10]) > 0 then e = now + tonumber(ARGV[10]) end
local args = {'s', 'done', 'l', ARGV[2], 'w', ARGV[2], 'e', e}
put(args, 'm', ARGV[5])
put(args, 'r', ARGV[6])
-- A result of up to 4 KiB in 64 chunks: the hash keeps under the
-- server's 128 entries (hash-max-listpack-entries) unless its other text
-- fields are long too.
put(args, 'x', ARGV[7], 64)
if ARGV[8] == '1' then
  args[#args + 1] = 'z'
  args[#args + 1] = '1'
end
redis.call('HSET', KEYS[1], unpack(args))
keep('done', now, e, now, tonumber(ARGV[9]), ARGV[4])
if redis.call('HEXISTS', KEYS[1], 'k') == 1 then redis.call('PUBLISH', ARGV[11], ARGV[1]) end
return 1
`)

// failScript: ARGV[5] reason, [6] definite ("1" or "0"), [7] grace,
// [8] retention of a failed record from now (ms; 0: the claim's expiry),
// [9] the channel its settle is published on when the record is watched.
var failScript = redis.NewScript(luaToMap + luaChunks + luaOwned + luaKeep + `
local now = tonumber(ARGV[2])
local l, e, other = owned()
if not l then return 0 end
if other then return {2, other} end
prune(ARGV[2])
local s = 'uncertain'
if ARGV[6] == '1' then
  s = 'failed'
  if tonumber(ARGV[8]) > 0 then e = now + tonumber(ARGV[8]) end
  redis.call('HINCRBY', KEYS[1], 'a', 1)
  redis.call('HSET', KEYS[1], 'at', ARGV[2], 'e', e)
end
local args = {'s', s, 'l', ARGV[2], 'w', ARGV[2]}
put(args, 'n', ARGV[5])
redis.call('HSET', KEYS[1], unpack(args))
keep(s, now, e, now, tonumber(ARGV[7]), ARGV[4])
if redis.call('HEXISTS', KEYS[1], 'k') == 1 then redis.call('PUBLISH', ARGV[9], ARGV[1]) end
return 1
`)

// extendScript: ARGV[5] new lease until, [6] grace. The retention is
// raised to the new lease end when it is sooner.
var extendScript = redis.NewScript(luaToMap + luaChunks + luaOwned + luaKeep + `
local now = tonumber(ARGV[2])
local l, e, other = owned()
if not l then return 0 end
if other then return {2, other} end
l = tonumber(ARGV[5])
if l > e then
  e = l
  redis.call('HSET', KEYS[1], 'e', ARGV[5])
end
redis.call('HSET', KEYS[1], 'l', ARGV[5], 'w', ARGV[2])
keep('pending', l, e, now, tonumber(ARGV[6]), ARGV[4])
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

// dropStaleScript drops the action key ARGV[1] from the index KEYS[1]
// unless its record KEYS[2] still (or again) has ARGV[3] as its field
// ARGV[2] (s: the state of a state's index; u: the run of a run's index):
// List found the entry's record gone, or in another state or run.
// Returns 1 when it dropped the entry.
var dropStaleScript = redis.NewScript(luaToMap + luaChunks + `
if join(tomap(redis.call('HGETALL', KEYS[2])), ARGV[2]) == ARGV[3] then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])
`)

// reindexOneScript puts one record in its state's index and, when its
// run is ARGV[2] (KEYS[7] that run's index; "" for none), in its run's,
// which then lives at least as long as the record; the keys are those of
// the write scripts, ARGV[1] the action key. Returns 1 when the record
// exists.
var reindexOneScript = redis.NewScript(luaToMap + luaChunks + `
local index = {pending = KEYS[2], uncertain = KEYS[4], done = KEYS[5], failed = KEYS[6]}
local r = tomap(redis.call('HGETALL', KEYS[1]))
if not r.s then return 0 end
if index[r.s] then redis.call('ZADD', index[r.s], r.l, ARGV[1]) end
if ARGV[2] ~= '' and (join(r, 'u') or '') == ARGV[2] then
  redis.call('ZADD', KEYS[7], r.l, ARGV[1])
  local ttl = redis.call('PTTL', KEYS[1])
  local cur = redis.call('PTTL', KEYS[7])
  if ttl == -1 then
    redis.call('PERSIST', KEYS[7])
  elseif ttl > 0 and cur ~= -1 and cur < ttl then
    redis.call('PEXPIRE', KEYS[7], ttl)
  end
end
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
// it from its bucket's indexes when deleted or gone, its run's index
// (KEYS[7], read by the caller before) included; the keys are those of
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
for i = 2, 7 do redis.call('ZREM', KEYS[i], ARGV[1]) end
return deleted
`)

// markScript marks the record KEYS[1] watched when it is pending, so that
// its settle is published (Store.Watch). Returns 1 when it marked it.
var markScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 's') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'k', '1')
return 1
`)
