"""The server-side half of the Redis store: one Lua library, loaded as a Redis Functions library
(``FUNCTION LOAD``, Redis >= 7), or sent with ``EVAL`` where a server refuses ``FUNCTION``.

Band lists hold entries ``<ref>,<id>`` (a stored version of an id), newest first, and on Redis
Cluster reservations ``!<token>,<deadline ms>`` that no reader counts as stored.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LIBRARY", "Functions"]

#: Bumped with any change of the library's behaviour (old servers keep the older one).
LIBRARY = "neardup3"

_LUA = """#!lua name=neardup3
local F = {}

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether the list holds a live reservation other than token's (expired ones are dropped).
local function reserved(key, token)
  local now = now_ms()
  for _, e in ipairs(redis.call('LRANGE', key, 0, -1)) do
    if string.byte(e, 1) == 33 then
      local tok, deadline = string.match(e, '^!([^,]*),(%d+)$')
      if tonumber(deadline) < now then
        redis.call('LREM', key, 0, e)
      elseif tok ~= token then
        return true
      end
    end
  end
  return false
end

local function push(key, entry, cap, at)
  local n = redis.call('LPUSH', key, entry)
  if n > cap then redis.call('LTRIM', key, 0, cap - 1) end
  if at ~= '0' then
    if n == 1 then redis.call('EXPIREAT', key, at) else redis.call('EXPIREAT', key, at, 'GT') end
  end
end

-- One version's data; returns the ref and band keys of the version it replaces.
local function put(key, ref, fp, m, k, x, t, at)
  local old = redis.call('HMGET', key, 'r', 'k')
  redis.call('HSET', key, 'r', ref, 'f', fp, 'm', m, 'k', k, 'x', x, 't', t)
  if at ~= '0' then redis.call('EXPIREAT', key, at) else redis.call('PERSIST', key) end
  return old
end

-- One server: store n texts when every band list still starts with the entry read (args:
-- n, nb, cap, nb heads ('*': any), then per text id, fp, m, k, x, t, expireat, band numbers).
-- keys: seq, times, nb band lists, n data keys. {0, j} when band j changed, else
-- {1, then per text ref, old ref, old band keys}.
F.add = function(keys, args)
  local n, nb, cap = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  for j = 1, nb do
    local want = args[3 + j]
    if want ~= '*' and (redis.call('LINDEX', keys[2 + j], 0) or '') ~= want then
      return {0, j}
    end
  end
  local out = {1}
  local ref = redis.call('INCRBY', keys[1], n) - n
  local a = 3 + nb
  for i = 1, n do
    ref = ref + 1
    local id, t, at = args[a + 1], args[a + 6], args[a + 7]
    local old = put(keys[2 + nb + i], ref, args[a + 2], args[a + 3], args[a + 4], args[a + 5],
                    t, at)
    redis.call('ZADD', keys[2], t, id)
    local entry = ref .. ',' .. id
    for j in string.gmatch(args[a + 8], '%d+') do push(keys[2 + tonumber(j)], entry, cap, at) end
    out[#out + 1] = ref
    out[#out + 1] = old[1]
    out[#out + 1] = old[2]
    a = a + 8
  end
  return out
end

-- One server: the first `limit` stored entries of each band list (keys) and the data (ref,
-- fingerprint, min-hash bytes) of their ids; args: limit, data key prefix.
-- {heads, lists of ids, flat id, ref, fp, m}. Entries whose data name another ref are stale.
F.query = function(keys, args)
  local limit, prefix = tonumber(args[1]), args[2]
  local heads, lists, data, seen = {}, {}, {}, {}
  for j, key in ipairs(keys) do
    local entries = redis.call('LRANGE', key, 0, limit - 1)
    heads[j] = entries[1] or ''
    local ids = {}
    for _, e in ipairs(entries) do
      local ref, id = string.match(e, '^(%d+),(.*)$')
      if ref then
        local d = seen[id]
        if d == nil then
          d = redis.call('HMGET', prefix .. id, 'r', 'f', 'm')
          seen[id] = d
          if d[1] then
            data[#data + 1] = id
            data[#data + 1] = d[1]
            data[#data + 1] = d[2]
            data[#data + 1] = d[3]
          end
        end
        if d[1] == ref then ids[#ids + 1] = id end
      end
    end
    lists[j] = ids
  end
  return {heads, lists, data}
end

-- Redis Cluster, one band list: reserve it for token when it still starts with args[1] and
-- no one else holds it; args: head, token, ttl ms. 1 or 0.
F.reserve = function(keys, args)
  local key = keys[1]
  if reserved(key, args[2]) then return 0 end
  if (redis.call('LINDEX', key, 0) or '') ~= args[1] then return 0 end
  redis.call('LPUSH', key, '!' .. args[2] .. ',' .. (now_ms() + tonumber(args[3])))
  return 1
end

-- Redis Cluster, one band list: drop token's reservation (if any), push the entries;
-- args: token, cap, expireat, entries.
F.commit = function(keys, args)
  local key, cap = keys[1], tonumber(args[2])
  if args[1] ~= '' then
    local mark = '!' .. args[1] .. ','
    for _, e in ipairs(redis.call('LRANGE', key, 0, -1)) do
      if string.sub(e, 1, #mark) == mark then redis.call('LREM', key, 0, e) end
    end
  end
  for i = 4, #args do push(key, args[i], cap, args[3]) end
  return 1
end

-- Redis Cluster: one version's data (args: ref, fp, m, k, x, t, expireat); the old ref, keys.
F.put = function(keys, args)
  return put(keys[1], args[1], args[2], args[3], args[4], args[5], args[6], args[7])
end

-- Delete a version's data when its timestamp is < args[1]; its ref and band keys, or nil.
F.drop = function(keys, args)
  local d = redis.call('HMGET', keys[1], 'r', 'k', 't')
  if not d[1] or tonumber(d[3]) >= tonumber(args[1]) then return false end
  redis.call('DEL', keys[1])
  return {d[1], d[2]}
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
  redis.register_function('neardup3_add', F.add)
  redis.register_function('neardup3_query', F.query)
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
