"""The server-side half of the Redis store: one Lua library, loaded as a Redis Functions library
(``FUNCTION LOAD``, Redis >= 7), or sent with ``EVAL`` where a server refuses ``FUNCTION``.

A band hash maps each band key (4 bytes) to its records, 16 bytes each (the id's 8-byte hash,
the version's 8-byte ref), newest last; on Redis Cluster a field ``!<band key>`` holds a
reservation ``<token>,<deadline ms>`` that no reader counts as stored.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LIBRARY", "Functions"]

#: Bumped with any change of the library's behaviour (old servers keep the older one).
LIBRARY = "neardup3"

_LUA = """#!lua name=neardup3
local F = {}
local REC = 16
local EMPTY = '\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0'  -- no records

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- HMGET of many fields (unpack has a limit), false for a missing one.
local function hmget(key, fields)
  local out = {}
  for s = 1, #fields, 4000 do
    local part = redis.call('HMGET', key, unpack(fields, s, math.min(s + 3999, #fields)))
    for _, v in ipairs(part) do out[#out + 1] = v end
  end
  return out
end

local function split(packed, width)
  local out = {}
  for p = 1, #packed, width do out[#out + 1] = string.sub(packed, p, p + width - 1) end
  return out
end

local function ref8(n)
  local s = ''
  for _ = 1, 8 do
    s = string.char(n % 256) .. s
    n = math.floor(n / 256)
  end
  return s
end

-- v without the record rec (at a record boundary).
local function without(v, rec)
  local p = 1
  while true do
    local s = string.find(v, rec, p, true)
    if not s then return v end
    if (s - 1) % REC == 0 then return string.sub(v, 1, s - 1) .. string.sub(v, s + REC) end
    p = s + 1
  end
end

-- Whether each field of a band hash still ends with its head (16 zero bytes: empty) and, with
-- a token, no one else holds a live reservation of it.
local function unchanged(key, fields, heads, token)
  local vals = hmget(key, fields)
  for i, v in ipairs(vals) do
    if (v and string.sub(v, -REC) or EMPTY) ~= heads[i] then return false end
  end
  if token then
    local marks, now = {}, now_ms()
    for i, f in ipairs(fields) do marks[i] = '!' .. f end
    for _, m in ipairs(hmget(key, marks)) do
      if m then
        local tok, deadline = string.match(m, '^([^,]*),(%d+)$')
        if tok ~= token and tonumber(deadline) >= now then return false end
      end
    end
  end
  return true
end

-- Cut records and append records (newest last) in fields of a band hash, keeping the newest
-- cap records of each; cuts and appends: field -> records.
local function apply(key, cuts, appends, cap)
  local fields, seen = {}, {}
  for f in pairs(cuts) do if not seen[f] then seen[f] = true; fields[#fields + 1] = f end end
  for f in pairs(appends) do if not seen[f] then seen[f] = true; fields[#fields + 1] = f end end
  if #fields == 0 then return end
  local vals, set, gone = hmget(key, fields), {}, {}
  for i, f in ipairs(fields) do
    local v = vals[i] or ''
    for _, rec in ipairs(split(cuts[f] or '', REC)) do v = without(v, rec) end
    v = v .. (appends[f] or '')
    if #v > cap * REC then v = string.sub(v, -cap * REC) end
    if #v == 0 then gone[#gone + 1] = f else set[#set + 1] = f; set[#set + 1] = v end
  end
  for s = 1, #set, 4000 do redis.call('HSET', key, unpack(set, s, math.min(s + 3999, #set))) end
  for s = 1, #gone, 4000 do redis.call('HDEL', key, unpack(gone, s, math.min(s + 3999, #gone))) end
end

-- One version's data; the ref and band keys of the version it replaces.
local function put(key, id, ref, fp, m, k, x, t)
  local old = redis.call('HMGET', key, 'r', 'k')
  redis.call('HSET', key, 'i', id, 'r', ref, 'f', fp, 'm', m, 'k', k, 'x', x, 't', t)
  return old
end

-- The values of fields (args[j]: packed 4-byte fields of band hash keys[j]).
F.fields = function(keys, args)
  local out = {}
  for j, key in ipairs(keys) do out[j] = hmget(key, split(args[j], 4)) end
  return out
end

-- One server: store n texts when each of their band fields still ends with the head read.
-- keys: seq, times, the band hashes, n data keys. args: n, cap, then per text: id, fp,
-- min-hash bytes, band keys (4 bytes each, one per band hash), text, timestamp, heads (16
-- bytes per band; '' without a check), whether it goes into the band hashes ('1' / '0').
-- {0} when a field changed (nothing written), else {1}.
F.add = function(keys, args)
  local n, cap = tonumber(args[1]), tonumber(args[2])
  local nb = #keys - 2 - n
  local first = redis.call('INCRBY', keys[1], n) - n
  -- per band hash: its fields (distinct, in order), the heads to check, the records to append
  local fields, at, heads, adds = {}, {}, {}, {}
  for j = 1, nb do fields[j] = {}; at[j] = {}; heads[j] = {}; adds[j] = {} end
  for i = 1, n do
    local a = 2 + 8 * (i - 1)
    if args[a + 8] == '1' then
      local k, h = args[a + 4], args[a + 7]
      local rec = string.sub(keys[2 + nb + i], -8) .. ref8(first + i)
      for j = 1, nb do
        local f = string.sub(k, 4 * j - 3, 4 * j)
        local x = at[j][f]
        if x then
          adds[j][x] = adds[j][x] .. rec
        else
          x = #fields[j] + 1
          at[j][f], fields[j][x], adds[j][x] = x, f, rec
          heads[j][x] = h ~= '' and string.sub(h, REC * j - REC + 1, REC * j)
        end
      end
    end
  end
  local values = {}
  for j = 1, nb do
    if #fields[j] > 0 then
      values[j] = hmget(keys[2 + j], fields[j])
      for x, v in ipairs(values[j]) do
        local want = heads[j][x]
        if want and (v and string.sub(v, -REC) or EMPTY) ~= want then return {0} end
      end
    end
  end
  local cuts, replaced = {}, false
  for j = 1, nb do cuts[j] = {} end
  for i = 1, n do
    local a, dkey = 2 + 8 * (i - 1), keys[2 + nb + i]
    local old = put(dkey, args[a + 1], ref8(first + i), args[a + 2], args[a + 3], args[a + 4],
                    args[a + 5], args[a + 6])
    redis.call('ZADD', keys[2], args[a + 6], args[a + 1])
    if old[1] then
      replaced = true
      local rec = string.sub(dkey, -8) .. old[1]
      for j, f in ipairs(split(old[2], 4)) do cuts[j][f] = (cuts[j][f] or '') .. rec end
    end
  end
  for j = 1, nb do
    local set = {}
    for x, f in ipairs(fields[j]) do
      local v = (values[j][x] or '') .. adds[j][x]
      if #v > cap * REC then v = string.sub(v, -cap * REC) end
      set[#set + 1] = f
      set[#set + 1] = v
    end
    for s = 1, #set, 4000 do
      redis.call('HSET', keys[2 + j], unpack(set, s, math.min(s + 3999, #set)))
    end
    if replaced then apply(keys[2 + j], cuts[j], {}, cap) end
  end
  return {1}
end

-- Redis Cluster, one band hash: reserve fields (args: token, ttl ms, packed fields, packed
-- heads) when each still ends with its head and no one else holds it. 1 or 0.
F.reserve = function(keys, args)
  local fields = split(args[3], 4)
  if not unchanged(keys[1], fields, split(args[4], REC), args[1]) then return 0 end
  local mark, set = args[1] .. ',' .. (now_ms() + tonumber(args[2])), {}
  for _, f in ipairs(fields) do set[#set + 1] = '!' .. f; set[#set + 1] = mark end
  for s = 1, #set, 4000 do redis.call('HSET', keys[1], unpack(set, s, math.min(s + 3999, #set))) end
  return 1
end

-- One band hash: drop token's reservations (args: token, cap, packed fields, then per field
-- the records to append, then per field the records to cut).
F.commit = function(keys, args)
  local fields, cap = split(args[3], 4), tonumber(args[2])
  local cuts, appends, marks = {}, {}, {}
  for i, f in ipairs(fields) do
    appends[f] = (appends[f] or '') .. args[3 + i]
    cuts[f] = (cuts[f] or '') .. args[3 + #fields + i]
    marks[#marks + 1] = '!' .. f
  end
  if args[1] ~= '' and #marks > 0 then
    local held = hmget(keys[1], marks)
    local mine = {}
    for i, m in ipairs(held) do
      if m and string.sub(m, 1, #args[1] + 1) == args[1] .. ',' then mine[#mine + 1] = marks[i] end
    end
    for s = 1, #mine, 4000 do
      redis.call('HDEL', keys[1], unpack(mine, s, math.min(s + 3999, #mine)))
    end
  end
  apply(keys[1], cuts, appends, cap)
  return 1
end

-- Redis Cluster: one version's data (args: id, ref, fp, m, k, x, t); the old ref, band keys.
F.put = function(keys, args)
  return put(keys[1], args[1], args[2], args[3], args[4], args[5], args[6], args[7])
end

-- Delete a version's data when it is of id args[1] with a timestamp < args[2]: its ref and
-- band keys, or nil.
F.drop = function(keys, args)
  local d = redis.call('HMGET', keys[1], 'i', 'r', 'k', 't')
  if d[1] ~= args[1] or tonumber(d[4]) >= tonumber(args[2]) then return false end
  redis.call('DEL', keys[1])
  return {d[2], d[3]}
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
  redis.register_function('neardup3_fields', F.fields)
  redis.register_function('neardup3_add', F.add)
  redis.register_function('neardup3_reserve', F.reserve)
  redis.register_function('neardup3_commit', F.commit)
  redis.register_function('neardup3_put', F.put)
  redis.register_function('neardup3_drop', F.drop)
  redis.register_function('neardup3_unlist', F.unlist)
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
        """(Re)load the library; fall back to ``EVAL`` when the server has no functions."""
        import redis

        try:
            self._client.function_load(_LUA, replace=True)
        except redis.exceptions.ResponseError as e:
            if "unknown command" not in str(e).lower():
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
