"""The Lua scripts of the Redis backend (format 2; each runs atomically on the server that owns
its keys). Every key a script touches is passed in KEYS."""

from __future__ import annotations

# Horizon when none is set: every period is live.
_NO_HORIZON = "-4611686018427387904"


def _store_lua(first: int, last: str, record: int, ref: int, fields: str) -> str:
    """Lua that stores an item once its ticket ``t`` is taken (local ``exp``: the expiry;
    local ``old``: the id's current ref): appends ARGV[record] to its own buckets
    KEYS[first..last], writes its data hash (KEYS[5]: the ticket, the fields from ARGV[fields]
    on, and ``o``, the version of the id it replaces), the id's ref ARGV[ref] (KEYS[3]) and the
    count (KEYS[2]), with their expiry."""
    return f"""for i = {first}, {last} do
  redis.call('APPEND', KEYS[i], ARGV[{record}])
  if exp > 0 then redis.call('EXPIREAT', KEYS[i], exp) end
end
redis.call('HSET', KEYS[5], 'q', t, unpack(ARGV, {fields}))
if old and old ~= ARGV[{ref}] then redis.call('HSET', KEYS[5], 'o', old) end
redis.call('SET', KEYS[3], ARGV[{ref}])
redis.call('INCR', KEYS[2])
if exp > 0 then
  redis.call('EXPIREAT', KEYS[5], exp)
  redis.call('EXPIREAT', KEYS[3], exp)
  redis.call('EXPIREAT', KEYS[2], exp)
end
"""


# One Redis server: the most recent writes' records, a ring of RECENT_SIZE 16-byte slots
# (ticket t in slot t % RECENT_SIZE), which every process reads along with its own calls to
# guess that a text is a copy of another process's recent one (RedisDeduplicator: the guess
# only picks the cheaper way; what is decided is always read from the buckets). Lua that
# returns, as one string, the slots of tickets `from`..`s` (the newest RECENT_SIZE at most) of
# the ring KEYS[ring] (a slot never written reads as zeros: ref 0, skipped by the reader).
RECENT_SIZE = 2048
_RECENT_FN = f"""
local function recent(ring, from, s)
  local n = {RECENT_SIZE}
  if from < s - n + 1 then from = s - n + 1 end
  if from > s then return '' end
  local a, b = (from % n) * 16, (s % n) * 16 + 15
  if a <= b then return redis.call('GETRANGE', ring, a, b) end
  local head = redis.call('GETRANGE', ring, a, n * 16 - 1)
  if #head < n * 16 - a then head = head .. string.rep('\\0', n * 16 - a - #head) end
  return head .. redis.call('GETRANGE', ring, 0, b)
end
"""

# One Redis server, the writes since ticket ARGV[1] (RECENT_FN). KEYS: seq, ring.
# Reply: {the newest ticket, their slots}.
_RECENT_LUA = (
    _RECENT_FN
    + """
local s = tonumber(redis.call('GET', KEYS[1]) or '0')
return {s, recent(KEYS[2], tonumber(ARGV[1]) + 1, s)}
"""
)

# One Redis server, the ticketed write: refuse a ref already in use ({-1}: draw another); take
# a ticket, append the record to the item's own buckets, write its data (with the ticket as
# field q), the id's ref and the record's slot of the recent ring, all in one atomic step. It
# reads no bucket: the client sends an MGET of the probe buckets right after it on the same
# connection, and counts as predecessors the near records whose ticket is smaller than its
# own (a writer with a smaller ticket ran its whole script before this one, so the MGET sees
# its records; docs/scale-out.md). With ARGV[4] >= 0 it also returns the ring's slots of the
# tickets after ARGV[4] up to its own.
# KEYS: seq, count, idkey, horizon, data, recent ring, own buckets...
# ARGV: record (16 bytes), ref (8 bytes), expireat (0: none), last ticket seen (-1: none),
# data fields...
# Reply: {ticket, previous ref of the id or false, horizon or false[, slots]}; for a
# write sent again whose first run stored it, that run's ticket and previous ref (no slots);
# {-1}: draw another ref.
_WRITE_LUA = (
    _RECENT_FN
    + """
if redis.call('EXISTS', KEYS[5]) == 1 then
  -- The ref is in use: this item's own write sent again after its reply was lost (the same
  -- id: answer what the first run did), or, p ~ 2**-64, another version's ({-1}).
  local mine = redis.call('HMGET', KEYS[5], 'i', 'q', 'o')
  if mine[1] == ARGV[6] then
    return {tonumber(mine[2]), mine[3] or false, redis.call('GET', KEYS[4])}
  end
  return {-1}
end
local exp = tonumber(ARGV[3])
local t = redis.call('INCR', KEYS[1])
redis.call('SETRANGE', KEYS[6], (t % """
    + str(RECENT_SIZE)
    + """) * 16, ARGV[1])
local old = redis.call('GET', KEYS[3])
"""
    + _store_lua(first=7, last="#KEYS", record=1, ref=2, fields="5")
    + """-- Without a retention (no expiry, one period) no period is ever dropped: no horizon.
local hz = exp > 0 and redis.call('GET', KEYS[4]) or false
local seen = tonumber(ARGV[4])
if seen < 0 then return {t, old or false, hz} end
return {t, old or false, hz, recent(KEYS[6], seen + 1, t)}
"""
)

# One Redis server, the bare index at probe radius 0 (few, small buckets): the whole
# check-and-add in one script. It scans the probe buckets' records, measures each one's Hamming
# distance to the fingerprint (two 32-bit halves, SWAR popcount with Redis's bit library) and,
# if any record (the id's own stored version included, as neardup.Index counts it) is within
# k, returns them with their ids and tickets and writes nothing; else it stores the item as
# _WRITE_LUA does. Scripts run one at a time, so of near-copies racing from any number of
# clients the first one run is added and every later one sees it.
# The probes at radius 0 are the first `nf` blocks (k < blocks): in the item's own period they
# are its own buckets, in each other live period one more key each. The ids of the matches are
# read from their data keys, named from the ref found (ARGV[8] .. hex): keys not passed in
# KEYS, which one server allows (this script is never sent to a cluster); it saves the round
# trip that would look them up.
# KEYS: seq, count, idkey, horizon, data, own buckets (nb), probes of other periods (ne)...
# ARGV: nb, k, record, ref, expireat, nf, own period, data key prefix, periods of the other
# probes (ne)..., data fields...
# Reply: {-1} (ref in use), {0, ref, distance, id, ticket, ...} (rejected) or
# {ticket, previous ref of the id or false} (added; also for a call sent again whose first run
# added it: that run's ticket and previous ref).
_CHECK_ADD_LUA = (
    """
local nb = tonumber(ARGV[1])
local k = tonumber(ARGV[2])
local exp = tonumber(ARGV[5])
local nf = tonumber(ARGV[6])
local ne = #KEYS - 5 - nb
if redis.call('EXISTS', KEYS[5]) == 1 then
  -- The ref is in use: this item's own check-and-add sent again after its reply was lost
  -- (the same id: it was added), or, p ~ 2**-64, another version's ({-1}).
  local mine = redis.call('HMGET', KEYS[5], 'i', 'q', 'o')
  if mine[1] == ARGV[10 + ne] then return {tonumber(mine[2]), mine[3] or false} end
  return {-1}
end
local band, rshift, bxor = bit.band, bit.rshift, bit.bxor
local function pc(x)
  x = x - band(rshift(x, 1), 0x55555555)
  x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
  return band(x + rshift(x, 4), 0x0F0F0F0F) % 255
end
-- Without a retention (no expiry, one period) no period is ever dropped: skip the horizon.
local hz = """
    + _NO_HORIZON
    + """
if exp > 0 or ne > 0 then hz = tonumber(redis.call('GET', KEYS[4]) or hz) end
local old = redis.call('GET', KEYS[3])
local qa, qb = struct.unpack('>I4I4', ARGV[3])
local found = {0}
local seen = {}
local function scan(key)
  local s = redis.call('GET', key)
  if not s then return end
  for off = 1, #s, 16 do
    local a, b = struct.unpack('>I4I4', s, off)
    local d = pc(bxor(a, qa)) + pc(bxor(b, qb))
    if d <= k then
      local r = string.sub(s, off + 8, off + 15)
      if not seen[r] then
        seen[r] = true
        local ra, rb = struct.unpack('>I4I4', r)
        local row = redis.call('HMGET', ARGV[8] .. string.format('%08x%08x', ra, rb), 'i', 'q')
        if row[1] then
          found[#found + 1] = r
          found[#found + 1] = d
          found[#found + 1] = row[1]
          found[#found + 1] = row[2] or ''
        end
      end
    end
  end
end
if tonumber(ARGV[7]) >= hz then
  for i = 6, 5 + nf do scan(KEYS[i]) end
end
for i = 1, ne do
  if tonumber(ARGV[8 + i]) >= hz then scan(KEYS[5 + nb + i]) end
end
if #found > 1 then return found end
local t = redis.call('INCR', KEYS[1])
"""
    + _store_lua(first=6, last="5 + nb", record=3, ref=4, fields="9 + ne")
    + """return {t, old or false}
"""
)

# Redis Cluster, first step of a write: create the data of a new ref, unless that ref is in use
# (reply 0: draw another). KEYS: data. ARGV: expireat (0: none), data fields (first 'i', id)...
_CLAIM_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  -- in use; by this same write when sent again after a lost reply (the same id: p ~ 2**-64
  -- otherwise), which answers as its first run did
  if ARGV[2] == 'i' and redis.call('HGET', KEYS[1], 'i') == ARGV[3] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
if tonumber(ARGV[1]) > 0 then redis.call('EXPIREAT', KEYS[1], ARGV[1]) end
return 1
"""

# Redis Cluster, after the record is appended: take a ticket and publish ref -> ticket in the
# same slot, so a reader holding a later ticket finds it. KEYS: seq, tickets, count, horizon.
# ARGV: ref (hex), expireat (0: none).
_TICKET_LUA = """
local had = redis.call('HGET', KEYS[2], ARGV[1])
if had then
  -- sent again after a lost reply: the ticket its first run took (counted once)
  return {tonumber(had), redis.call('GET', KEYS[4]) or false}
end
local t = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], t)
redis.call('INCR', KEYS[3])
local exp = tonumber(ARGV[2])
if exp > 0 then
  redis.call('EXPIREAT', KEYS[2], exp)
  redis.call('EXPIREAT', KEYS[3], exp)
end
return {t, redis.call('GET', KEYS[4]) or false}
"""

# Lua: remove the 16-byte record rec from the bucket key (at a record boundary), keeping the
# key's expiry; an emptied bucket is deleted.
_CUT_RECORD = """
local function cut(key, rec)
  local s = redis.call('GET', key)
  if not s then return end
  -- Every copy at a record boundary goes: a record is in a bucket once, but on a cluster an
  -- APPEND sent again after a lost reply may have stored it twice.
  local kept, last, init = {}, 1, 1
  while true do
    local pos = string.find(s, rec, init, true)
    if not pos then break end
    if (pos - 1) % 16 == 0 then
      kept[#kept + 1] = string.sub(s, last, pos - 1)
      last = pos + 16
      init = pos + 16
    else
      init = pos + 1
    end
  end
  if last == 1 then return end
  kept[#kept + 1] = string.sub(s, last)
  local out = table.concat(kept)
  if #out == 0 then
    redis.call('DEL', key)
  else
    redis.call('SET', key, out, 'KEEPTTL')
  end
end
"""

# Redis Cluster: remove record ARGV[1] from the one bucket KEYS[1].
_REMOVE_RECORD_LUA = (
    _CUT_RECORD
    + """
cut(KEYS[1], ARGV[1])
return 0
"""
)

# Lua: the data key of a ref (8 bytes) under the data key prefix `pre`, on one server (a key
# named from data, which one server allows).
_DATA_KEY = """
local function dkey(pre, r)
  local a, b = struct.unpack('>I4I4', r)
  return pre .. string.format('%08x%08x', a, b)
end
"""

# One Redis server: remove a stored version in one step (nothing if its data are already gone):
# its record from its buckets, its data, one count (while its period's count exists). ARGV[2]
# (its ref) given, the id: if the id key still names this version, point it back at the
# version it replaced (field `o` of its data, with that version's remaining time to live;
# deleted if there is none or it is gone); if a later write of the id replaced this one
# meanwhile, splice this one out of the chain of `o` fields (the later version's `o` gets this
# one's). ARGV[4] = 'forget' (remove(id)): delete the id key instead of restoring.
# KEYS: idkey, data, count, buckets... ARGV: record, ref or '', data key prefix, mode.
# Reply: false (already gone) or {the ref this version had replaced or false, 1 if that ref is
# still linked (the id names it again, or a later version's `o` does), else 0: nothing else
# points at it, and the caller drops it with the rest of its chain}.
_RETRACT_LUA = (
    _CUT_RECORD
    + _DATA_KEY
    + """
local o = redis.call('HGET', KEYS[2], 'o')
if redis.call('DEL', KEYS[2]) == 0 then return false end
for i = 4, #KEYS do cut(KEYS[i], ARGV[1]) end
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('DECR', KEYS[3]) end
if ARGV[2] == '' then return {o or false, 0} end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[2] then
  local ttl = -2
  if o and ARGV[4] ~= 'forget' then ttl = redis.call('PTTL', dkey(ARGV[3], o)) end
  if ttl == -1 then
    redis.call('SET', KEYS[1], o)
  elseif ttl > 0 then
    redis.call('SET', KEYS[1], o, 'PX', ttl)
  else
    redis.call('DEL', KEYS[1])
    return {o or false, 0}
  end
  return {o, 1}
end
local x = cur
for _ = 1, 64 do
  if not x then break end
  local k = dkey(ARGV[3], x)
  local xo = redis.call('HGET', k, 'o')
  if xo == ARGV[2] then
    if o then redis.call('HSET', k, 'o', o) else redis.call('HDEL', k, 'o') end
    return {o or false, 1}
  end
  x = xo
end
return {o or false, 0}
"""
)

# One Redis server, a version now stored for good (added): the version it replaced (field `o`
# of its data KEYS[1]), with that version's fingerprint and period, for the caller to drop
# (read only: sent again after a lost reply, it answers the same; an `o` left pointing at
# dropped data is harmless). ARGV: data key prefix.
# Reply: false (none) or {ref, fp hex or false, period or false} (false: its data are gone).
_TAKE_REPLACED_LUA = (
    _DATA_KEY
    + """
local o = redis.call('HGET', KEYS[1], 'o')
if not o then return false end
local row = redis.call('HMGET', dkey(ARGV[1], o), 'f', 'p')
return {o, row[1] or false, row[2] or false}
"""
)

# Redis Cluster: an id's versions, where no script sees an id key and a version's data together
# (they hash to different slots). The id key holds the id's chain itself: 16-byte entries, a
# ref (8 bytes) and its expiry (8 bytes, Unix seconds, 0: none), the newest first; the first
# entry not past its expiry is the version the id names. Refs cut out of the chain stay as
# tombstones for a minute (the expiry's top bit set; the newest 32), so that a write sent
# again late (a lost reply) is refused instead of bringing back a version that was dropped.
# The key expires with its last entry. Entries past their expiry are dropped whenever the chain
# is changed; a key of the bare 8-byte ref (written before the chain was kept in it) reads as a
# chain of that one version. Every change is one script on the one key, so writes and
# decisions of one id from any number of processes interleave safely (a one-server index
# keeps the same chain in the `o` fields of the data instead).
# KEYS: idkey. ARGV: mode, then the entry ('push') or refs (8 bytes each).
#  'push' (a version was written): put it first; reply {the version it replaced} or {}, the
#         same when sent again; {0} if the ref was cut meanwhile (refused);
#  'older' (read only): the refs of the entries older than ARGV[2] (a version now stored for
#         good: the client drops those versions, then 'cut's them), without ARGV[2] every
#         ref (remove(id): dropped and cut the same way);
#  'cut': take the refs ARGV[2..] out of the chain wherever they are, leaving tombstones (a
#         rejected version: the id names again what it named before; versions dropped).
# (A write also checks that its data still exist once its push is accepted, so a tombstone
# that aged out only costs it that check.)
# Each mode changes the chain the same way when sent again, so a lost reply loses nothing.
_CHAIN_LUA = """
local mode, key = ARGV[1], KEYS[1]
local TOMB = 2147483648
local raw = redis.call('GET', key)
local now = tonumber(redis.call('TIME')[1])
local function expiry(e)
  local hi, lo = struct.unpack('>I4I4', e, 9)
  if hi >= TOMB then hi = hi - TOMB end
  return hi * 4294967296 + lo
end
local es, tombs = {}, {}
if raw and #raw == 8 then
  -- (written before the chain was kept here: the ref alone, with the key's expiry)
  local ttl = redis.call('TTL', key)
  es[1] = raw .. struct.pack('>I4I4', 0, ttl > 0 and now + ttl or 0)
elseif raw then
  for off = 1, #raw - 15, 16 do
    local e = string.sub(raw, off, off + 15)
    local exp = expiry(e)
    if exp == 0 or exp > now then
      if struct.unpack('>I4', e, 9) >= TOMB then tombs[#tombs + 1] = e else es[#es + 1] = e end
    end
  end
end
local function find(list, ref)
  for i, e in ipairs(list) do
    if string.sub(e, 1, 8) == ref then return i end
  end
end
local out = {}
if mode == 'older' then
  local pos = 0
  if ARGV[2] then pos = find(es, ARGV[2]) end
  if pos then
    for i = pos + 1, #es do out[#out + 1] = string.sub(es[i], 1, 8) end
  end
  return out
elseif mode == 'push' then
  local ref = string.sub(ARGV[2], 1, 8)
  if find(tombs, ref) then return {0} end
  local pos = find(es, ref)
  if not pos then table.insert(es, 1, ARGV[2]); pos = 1 end
  if es[pos + 1] then out[1] = string.sub(es[pos + 1], 1, 8) end
elseif mode == 'cut' then
  for j = 2, #ARGV do
    local pos = find(es, ARGV[j])
    if pos then table.remove(es, pos) end
    if not find(tombs, ARGV[j]) then
      table.insert(tombs, 1, ARGV[j] .. struct.pack('>I4I4', TOMB, now + 60))
    end
  end
  while #tombs > 32 do table.remove(tombs) end
end
if #es == 0 and #tombs == 0 then
  redis.call('DEL', key)
  return out
end
redis.call('SET', key, table.concat(es) .. table.concat(tombs))
local last, forever = 0, false
for _, list in ipairs({es, tombs}) do
  for _, e in ipairs(list) do
    local x = expiry(e)
    if x == 0 then forever = true elseif x > last then last = x end
  end
end
if not forever then redis.call('EXPIREAT', key, last) end
return out
"""

# Move the horizon to ARGV[1] (periods before it are expired); return how many items the
# dropped periods held. KEYS: horizon. ARGV: new horizon, count key prefix, first live period,
# the period after the current one.
_EXPIRE_LUA = """
-- (periods before the first live one are not counted: their keys are expiring, and a write
-- of an item older than the retention may have counted one for a minute)
local old = math.max(tonumber(redis.call('GET', KEYS[1]) or ARGV[3]), tonumber(ARGV[3]))
local new = tonumber(ARGV[1])
local n = 0
if new > old then
  -- (ARGV[4]: after the current period, where nothing is counted: a `before` far ahead costs
  -- nothing more)
  for p = old, math.min(new, tonumber(ARGV[4])) - 1 do
    local key = ARGV[2] .. p
    n = n + tonumber(redis.call('GET', key) or '0')
    redis.call('DEL', key)
  end
  redis.call('SET', KEYS[1], new)
end
return n
"""
