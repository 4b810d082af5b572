"""The server-side half of the Redis store: one Lua library, loaded as a Redis Functions library
(``FUNCTION LOAD``, Redis >= 7), or sent with ``EVAL`` where a server refuses ``FUNCTION``.

A band hash maps each band key (4 bytes) to its records, 16 bytes each (the id's 8-byte hash,
the version's 8-byte ref), newest last; its field ``#`` counts the changes of its records
(every append and cut adds one), so that a write that finds it as read knows that no field
changed; on Redis Cluster a field ``!<band key>`` holds a reservation ``<token>,<deadline ms>``
that no reader counts as stored.

Every write function can run twice with the same arguments without harm: redis-py sends a call
again when the connection drops after Redis ran it but before its reply came (a cluster client
always does; a one-server client when told to retry). A version's ref is unique, so a call finds
its own earlier run by it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LIBRARY", "Functions"]

#: Bumped with any change of the library's behaviour (old servers keep the older one).
LIBRARY = "neardup7"

_LUA = """#!lua name=neardup7
local F = {}
local REC = 16

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Calls of cmd on key with the items of list (unpack has a limit).
local function chunked(cmd, key, list)
  if #list <= 4000 then
    local got = #list > 0 and redis.call(cmd, key, unpack(list))
    return type(got) == 'table' and got or {}
  end
  local out = {}
  for s = 1, #list, 4000 do
    local part = redis.call(cmd, key, unpack(list, s, math.min(s + 3999, #list)))
    if type(part) == 'table' then
      for _, v in ipairs(part) do out[#out + 1] = v end
    end
  end
  return out
end

-- The pieces of width bytes of packed (struct.unpack: a C loop, up to 2000 at a time).
local function split(packed, width)
  local out, n, p = nil, #packed / width, 1
  while n > 0 do
    local k = math.min(n, 2000)
    local part = {struct.unpack(string.rep('c' .. width, k), packed, p)}
    p = part[k + 1]
    part[k + 1] = nil
    if not out then out = part else for x = 1, k do out[#out + 1] = part[x] end end
    n = n - k
  end
  return out or {}
end

-- The pieces of blob whose lengths lens packs (4 bytes each, big-endian).
local function cuts(blob, lens)
  local out, p = {}, 1
  for _, len in ipairs(split(lens, 4)) do
    local a, b, c, d = string.byte(len, 1, 4)
    local e = p + ((a * 256 + b) * 256 + c) * 256 + d
    out[#out + 1] = string.sub(blob, p, e - 1)
    p = e
  end
  return out
end

-- Whether fields (values vals) are as read: heads packs, for each field read non-empty, its
-- index (4 bytes, from 0) and its newest record then; every other field must still be empty.
local function same(vals, heads)
  local want = {}
  for p = 1, #heads, 4 + REC do
    local a, b, c, d = string.byte(heads, p, p + 3)
    want[((a * 256 + b) * 256 + c) * 256 + d + 1] = string.sub(heads, p + 4, p + 3 + REC)
  end
  for x = 1, #vals do
    local v = vals[x]
    if (v and string.sub(v, -REC)) ~= (want[x] or false) then return false end
  end
  return true
end

-- Where the record rec is in the value v (at a record boundary), or nil.
local function find(v, rec)
  local p = 1
  while true do
    local s = string.find(v, rec, p, true)
    if not s or (s - 1) % REC == 0 then return s end
    p = s + 1
  end
end

-- Append records to fields whose values are vals: blob holds them in field order, counts (2
-- bytes each, big-endian) says how many go to each; a value keeps its newest cap records.
-- once: a field that holds the first of its records already has them (a call run again).
local function append(key, fields, vals, blob, counts, cap, once)
  local set, n, p, most = {}, 0, 1, cap * REC
  for x = 1, #fields do
    local hi, lo = string.byte(counts, 2 * x - 1, 2 * x)
    local e = p + REC * (hi * 256 + lo)
    local v = vals[x]
    if not (once and v and e > p and find(v, string.sub(blob, p, p + REC - 1))) then
      v = v and v .. string.sub(blob, p, e - 1) or string.sub(blob, p, e - 1)
      if #v > most then v = string.sub(v, -most) end
      set[n + 1], set[n + 2], n = fields[x], v, n + 2
    end
    p = e
  end
  chunked('HSET', key, set)
end

-- Cut records from fields (packed pairs: fields 4 bytes each, records 16 bytes each), each at
-- a record boundary.
local function cut(key, fields, recs)
  local changed = false
  for x, f in ipairs(split(fields, 4)) do
    local v, rec = redis.call('HGET', key, f), string.sub(recs, REC * x - REC + 1, REC * x)
    local s = v and find(v, rec)
    if s then
      v = string.sub(v, 1, s - 1) .. string.sub(v, s + REC)
      if #v == 0 then redis.call('HDEL', key, f) else redis.call('HSET', key, f, v) end
      changed = true
    end
  end
  if changed then redis.call('HINCRBY', key, '#', 1) end
end

-- Field-value pairs packed as 4-byte field and one 16-byte record each, as tables of up to
-- 1000 pairs (struct.unpack: a C loop), each ready for HSET.
local function unpairs(packed)
  local out, n, p = {}, #packed / (4 + REC), 1
  while n > 0 do
    local k = math.min(n, 1000)
    local part = {struct.unpack(string.rep('c4c16', k), packed, p)}
    p = part[2 * k + 1]
    part[2 * k + 1] = nil
    out[#out + 1] = part
    n = n - k
  end
  return out
end

-- A version's data, one string: ref (8 bytes), fingerprint (8 bytes), timestamp (a double),
-- the length of its head (4 bytes: up to its text), then id, min-hash bytes, band keys and
-- text, each after its length (4 bytes); big-endian. (One string instead of a hash of these
-- fields: a hash with a value over 64 bytes is a hash table, about 350 bytes more a version.)
local HEAD = '>c8c8dI4I4c0I4c0I4c0'
local DATA = HEAD .. 'I4c0'

-- The ref, fingerprint, timestamp, head length, id, min-hash bytes and band keys of a data
-- string or its head.
local function fields_of(v)
  return struct.unpack(HEAD, v)
end

-- The data string at key up to its text (false: none), read without the text.
local function head(key)
  local v = redis.call('GETRANGE', key, 0, 511)
  if v == '' then return false end
  local n = struct.unpack('>I4', v, 25)
  if n > #v then v = redis.call('GETRANGE', key, 0, n - 1) end
  return string.sub(v, 1, n)
end

-- Store one version's data (id, ref, fp, min-hash bytes, band keys, text, timestamp); the ref
-- and band keys of the version it replaces ({false, false}: none, or this version itself: a
-- call run again). Its (timestamp, id) go to the list times when given.
local function put(key, times, i, r, f, m, k, x, t)
  local v = struct.pack(DATA, r, f, tonumber(t), 40 + #i + #m + #k, #i, i, #m, m, #k, k, #x, x)
  local old = redis.call('SET', key, v, 'GET')
  if times then times[#times + 1] = t; times[#times + 1] = i end
  if not old or string.sub(old, 1, 8) == r then return {false, false} end
  local ref, _, _, _, _, _, keys = fields_of(old)
  return {ref, keys}
end

-- Of each band hash keys[j], the fields args[j + 1] (packed, 4 bytes each): its change count
-- ('' when none), the indices (from 0) of the fields that are not empty and their values,
-- each cut to its newest args[1] bytes.
F.fields = function(keys, args)
  local out, most = {}, tonumber(args[1])
  for j, key in ipairs(keys) do
    local vals, idx, full = chunked('HMGET', key, split(args[j + 1], 4)), {}, {}
    for x = 1, #vals do
      local v = vals[x]
      if v then
        idx[#idx + 1] = x - 1
        full[#full + 1] = #v > most and string.sub(v, -most) or v
      end
    end
    out[j] = {redis.call('HGET', key, '#') or '', idx, full}
  end
  return out
end

-- The data string of each key (false: none); only its head unless args[1] is '1' (a check
-- reads the data of every candidate and the texts of the few it verifies).
F.data = function(keys, args)
  local out = {}
  for x, key in ipairs(keys) do
    if args[1] == '1' then out[x] = redis.call('GET', key) else out[x] = head(key) end
  end
  return out
end

-- One server: store n versions when every band field they go to is as read.
-- keys: times, the band hashes, the n data keys. args: n, cap, then per band hash: its change
-- count as read ('-': no check), the pairs of fields read empty that get one record (see
-- unpairs), then of its other fields: the fields, heads (see same), records, counts (see
-- append); then the versions' refs, fingerprints (8 bytes), min-hash bytes and band keys,
-- each packed (fixed widths), their ids and texts packed (see cuts) with their lengths, and
-- their timestamps joined by ','. The fields read empty are not read again when the change
-- count is as read. {0} when a field changed (nothing written); {1} when written, or when
-- this call ran before (its last version is stored).
F.add = function(keys, args)
  local n, cap = tonumber(args[1]), tonumber(args[2])
  local nb = #keys - 1 - n
  local last = head(keys[#keys])
  if last and string.sub(last, 1, 8) == string.sub(args[3 + 6 * nb], 8 * n - 7, 8 * n) then
    return {1}
  end
  local sets, fields, vals = {}, {}, {}
  for j = 1, nb do
    local a, key = 3 + 6 * (j - 1), keys[1 + j]
    sets[j] = unpairs(args[a + 1])
    fields[j] = split(args[a + 2], 4)
    vals[j] = chunked('HMGET', key, fields[j])
    if args[a] ~= '-' then
      if not same(vals[j], args[a + 3]) then return {0} end
      if #sets[j] > 0 and (redis.call('HGET', key, '#') or '') ~= args[a] then
        for _, part in ipairs(sets[j]) do
          local empty = {}
          for x = 1, #part, 2 do empty[#empty + 1] = part[x] end
          for _, v in ipairs(redis.call('HMGET', key, unpack(empty))) do
            if v then return {0} end
          end
        end
      end
    end
  end
  local cf, cr, times = {}, {}, {}
  for j = 1, nb do cf[j] = {}; cr[j] = {} end
  local a = 3 + 6 * nb
  local refs, fps, ms, ks = split(args[a], 8), split(args[a + 1], 8),
                            split(args[a + 2], #args[a + 2] / n), split(args[a + 3], 4 * nb)
  local ids, texts, ts = cuts(args[a + 4], args[a + 5]), cuts(args[a + 6], args[a + 7]), {}
  for t in string.gmatch(args[a + 8], '[^,]+') do ts[#ts + 1] = t end
  for i = 1, n do
    local key = keys[1 + nb + i]
    local old = put(key, times, ids[i], refs[i], fps[i], ms[i], ks[i], texts[i], ts[i])
    if old[1] then
      for j, f in ipairs(split(old[2], 4)) do
        cf[j][#cf[j] + 1] = f
        cr[j][#cr[j] + 1] = string.sub(key, -8) .. old[1]
      end
    end
  end
  for j = 1, nb do
    local a, key = 3 + 6 * (j - 1), keys[1 + j]
    append(key, fields[j], vals[j], args[a + 4], args[a + 5], cap)
    for _, part in ipairs(sets[j]) do redis.call('HSET', key, unpack(part)) end
    if #fields[j] + #sets[j] > 0 then redis.call('HINCRBY', key, '#', 1) end
    if #cf[j] > 0 then cut(key, table.concat(cf[j]), table.concat(cr[j])) end
  end
  chunked('ZADD', keys[1], times)
  return {1}
end

-- Redis Cluster, one band hash: reserve fields (args: token, ttl ms, fields, heads) when
-- each is as read (see same) and no one else holds it. 1 or 0.
F.reserve = function(keys, args)
  local fields = split(args[3], 4)
  if not same(chunked('HMGET', keys[1], fields), args[4]) then return 0 end
  local marks, now = {}, now_ms()
  for x, f in ipairs(fields) do marks[x] = '!' .. f end
  for _, m in ipairs(chunked('HMGET', keys[1], marks)) do
    if m then
      local tok, deadline = string.match(m, '^([^,]*),(%d+)$')
      if tok ~= args[1] and tonumber(deadline) >= now then return 0 end
    end
  end
  local set, mark = {}, args[1] .. ',' .. (now + tonumber(args[2]))
  for _, m in ipairs(marks) do set[#set + 1] = m; set[#set + 1] = mark end
  chunked('HSET', keys[1], set)
  return 1
end

-- Redis Cluster, one band hash: drop token's reservations of fields and append records
-- (args: token, cap, fields, records, counts; see append).
F.commit = function(keys, args)
  local fields = split(args[3], 4)
  local marks, mine = {}, {}
  for x, f in ipairs(fields) do marks[x] = '!' .. f end
  for x, m in ipairs(chunked('HMGET', keys[1], marks)) do
    if m and string.sub(m, 1, #args[1] + 1) == args[1] .. ',' then mine[#mine + 1] = marks[x] end
  end
  chunked('HDEL', keys[1], mine)
  if args[4] ~= '' then
    append(keys[1], fields, chunked('HMGET', keys[1], fields), args[4], args[5],
           tonumber(args[2]), true)
    redis.call('HINCRBY', keys[1], '#', 1)
  end
  return 1
end

-- One band hash: cut records (args: fields, records; see cut).
F.cut = function(keys, args)
  cut(keys[1], args[1], args[2])
  return 1
end

-- Redis Cluster: one version's data (args: see put); the old ref and band keys.
F.put = function(keys, args)
  return put(keys[1], nil, unpack(args))
end

-- The ref, id, band keys and timestamp of the version whose data key is key, or nil.
local function version(key)
  local v = head(key)
  if not v then return nil end
  local r, _, t, _, i, _, k = fields_of(v)
  return r, i, k, t
end

-- Delete a version's data when it is version args[3] of id args[1] with a timestamp <
-- args[2]: 1 when deleted, 2 when there is none (deleted already), 0 when it is another.
F.drop = function(keys, args)
  local r, i, _, t = version(keys[1])
  if not r then return 2 end
  if i ~= args[1] or r ~= args[3] or t >= tonumber(args[2]) then return 0 end
  redis.call('DEL', keys[1])
  return 1
end

-- One server: delete the versions of ids (args: before, then the ids; keys: times, the band
-- hashes, then each id's data key) whose timestamp is < before, with their records, at once;
-- how many.
F.remove = function(keys, args)
  local before, nb, done = tonumber(args[1]), #keys - #args, 0
  for x = 2, #args do
    local key = keys[nb + x]
    local r, i, k, t = version(key)
    if i == args[x] and t < before then
      redis.call('DEL', key)
      redis.call('ZREM', keys[1], args[x])
      local rec, fields = string.sub(key, -8) .. r, split(k, 4)
      for j = 1, nb do cut(keys[1 + j], fields[j], rec) end
      done = done + 1
    end
  end
  return done
end

-- Drop ids (args[2..]) from the times set when their time is < args[1].
F.unlist = function(keys, args)
  local before, n = tonumber(args[1]), 0
  for i = 2, #args do
    local s = redis.call('ZSCORE', keys[1], args[i])
    if s and tonumber(s) < before then n = n + redis.call('ZREM', keys[1], args[i]) end
  end
  return n
end

if redis.register_function then
  -- (reads: allowed while the server refuses writes, out of memory or failing to save)
  redis.register_function{function_name='neardup7_fields', callback=F.fields, flags={'no-writes'}}
  redis.register_function{function_name='neardup7_data', callback=F.data, flags={'no-writes'}}
  redis.register_function('neardup7_add', F.add)
  redis.register_function('neardup7_reserve', F.reserve)
  redis.register_function('neardup7_commit', F.commit)
  redis.register_function('neardup7_put', F.put)
  -- (deletes: allowed out of memory, so that removals and the retention window free it)
  redis.register_function{function_name='neardup7_cut', callback=F.cut, flags={'allow-oom'}}
  redis.register_function{function_name='neardup7_drop', callback=F.drop, flags={'allow-oom'}}
  redis.register_function{function_name='neardup7_remove', callback=F.remove, flags={'allow-oom'}}
  redis.register_function{function_name='neardup7_unlist', callback=F.unlist, flags={'allow-oom'}}
end
"""

# The same code sent with EVAL: the function's name is the last argument.
_SCRIPT = _LUA.split("\n", 1)[1] + "\nlocal name = table.remove(ARGV)\nreturn F[name](KEYS, ARGV)\n"


class Functions:
    """Calls into the library on ``client`` (a redis-py client or pipeline issues them): as
    ``FCALL`` after ``FUNCTION LOAD REPLACE`` (on every master of a cluster), or as ``EVAL``
    when the server refuses ``FUNCTION``. A server restarted without its functions gets them
    again from :meth:`reload`."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.scripted = False
        self.reload()

    def reload(self) -> None:
        """(Re)load the library; fall back to ``EVAL`` when the server has no functions or the
        user may not load them (an ACL without ``FUNCTION``)."""
        import redis

        try:
            self._client.function_load(_LUA, replace=True)
        except redis.exceptions.ResponseError as e:
            refused = isinstance(e, redis.exceptions.NoPermissionError)
            if not refused and "unknown command" not in str(e).lower():
                raise
            self.scripted = True

    def call(self, target: Any, name: str, keys: list[Any], args: list[Any]) -> Any:
        """Issue ``name`` with ``keys`` and ``args`` on ``target`` (the client or a pipeline)."""
        if self.scripted:
            return target.execute_command("EVAL", _SCRIPT, len(keys), *keys, *args, name)
        return target.execute_command("FCALL", f"{LIBRARY}_{name}", len(keys), *keys, *args)


def missing_function(exc: BaseException) -> bool:
    """Whether ``exc`` says the server lost the library (restarted without persistence)."""
    return "function not found" in str(exc).lower()
