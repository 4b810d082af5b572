"""The Lua scripts of the Redis backend (each runs atomically on the server that owns its keys)."""

from __future__ import annotations

# One Redis server: take a ticket, read the (few) probe buckets passed, append the entry to its
# own buckets and write the item record, all in one atomic step. KEYS: seq, count, record, horizon,
# probes..., own buckets... ARGV: nprobes, fingerprint (8 bytes), expireat (0: none), id,
# record fields...
_WRITE_LUA = """
local t = redis.call('INCR', KEYS[1])
local np = tonumber(ARGV[1])
local exp = tonumber(ARGV[3])
local uid = 't' .. t
local entry = ARGV[2] .. uid .. '|' .. ARGV[4]
local out = {t, redis.call('HGETALL', KEYS[3]), redis.call('GET', KEYS[4]) or false}
for i = 5, 4 + np do
  out[#out + 1] = redis.call('LRANGE', KEYS[i], 0, -1)
end
for i = 5 + np, #KEYS do
  redis.call('RPUSH', KEYS[i], entry)
  if exp > 0 then redis.call('EXPIREAT', KEYS[i], exp) end
end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'u', uid, unpack(ARGV, 5))
redis.call('INCR', KEYS[2])
if exp > 0 then
  redis.call('EXPIREAT', KEYS[3], exp)
  redis.call('EXPIREAT', KEYS[2], exp)
end
return out
"""

# Redis Cluster, after the entry is appended: take a ticket and publish uid -> ticket in the
# same slot, so a reader holding a later ticket finds it. KEYS: seq, tickets, count, horizon.
# ARGV: uid, expireat (0: none).
_TICKET_LUA = """
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

# Delete the record KEYS[1] if its uid is still ARGV[1].
_DEL_IF_LUA = """
if redis.call('HGET', KEYS[1], 'u') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""

# Move the horizon to ARGV[1] (periods before it are expired); return how many items the
# dropped periods held. KEYS: horizon. ARGV: new horizon, count key prefix, first live period.
_EXPIRE_LUA = """
local old = tonumber(redis.call('GET', KEYS[1]) or ARGV[3])
local new = tonumber(ARGV[1])
local n = 0
if new > old then
  for p = old, new - 1 do
    local key = ARGV[2] .. p
    n = n + tonumber(redis.call('GET', key) or '0')
    redis.call('DEL', key)
  end
  redis.call('SET', KEYS[1], new)
end
return n
"""

# One Redis server, the bare index at probe radius 0 (few, small buckets): the whole
# check-and-add in one script. It reads the probe buckets, measures each entry's Hamming distance
# to the fingerprint (two 32-bit halves, SWAR popcount with Redis's bit library) and, if any entry
# (not of the same id) is within k, returns them and writes nothing; else it takes a ticket and
# stores the item. Scripts run one at a time, so of near-copies racing from any number of clients
# the first one run is added and every later one sees it.
# KEYS: seq, count, record, horizon, probes..., own buckets...
# ARGV: nprobes, k, fingerprint (8 bytes), expireat (0: none), id, probe periods (nprobes)...,
# record fields...
# Reply: {0, entry, distance, entry, distance, ...} (rejected) or {ticket, old record (HGETALL)}.
_CHECK_ADD_LUA = """
local np = tonumber(ARGV[1])
local k = tonumber(ARGV[2])
local fp = ARGV[3]
local exp = tonumber(ARGV[4])
local tail = '|' .. ARGV[5]
local band, rshift, bxor = bit.band, bit.rshift, bit.bxor
local function pc(x)
  x = x - band(rshift(x, 1), 0x55555555)
  x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
  return band(x + rshift(x, 4), 0x0F0F0F0F) % 255
end
local hz = tonumber(redis.call('GET', KEYS[4]) or '-4611686018427387904')
local qa, qb = struct.unpack('>I4I4', fp)
local found = {0}
for i = 1, np do
  if tonumber(ARGV[5 + i]) >= hz then
    local es = redis.call('LRANGE', KEYS[4 + i], 0, -1)
    for _, e in ipairs(es) do
      local a, b = struct.unpack('>I4I4', e)
      local d = pc(bxor(a, qa)) + pc(bxor(b, qb))
      if d <= k and string.sub(e, (string.find(e, '|', 9, true))) ~= tail then
        found[#found + 1] = e
        found[#found + 1] = d
      end
    end
  end
end
if #found > 1 then return found end
local t = redis.call('INCR', KEYS[1])
local uid = 't' .. t
local entry = fp .. uid .. tail
local out = {t, redis.call('HGETALL', KEYS[3])}
for i = 5 + np, #KEYS do
  redis.call('RPUSH', KEYS[i], entry)
  if exp > 0 then redis.call('EXPIREAT', KEYS[i], exp) end
end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'u', uid, unpack(ARGV, 6 + np))
redis.call('INCR', KEYS[2])
if exp > 0 then
  redis.call('EXPIREAT', KEYS[3], exp)
  redis.call('EXPIREAT', KEYS[2], exp)
end
return out
"""
