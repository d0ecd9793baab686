-- Decide every rule that matched one exchange, atomically: brownout's Redis schedule store.
--
-- The same checks, in the same order, as brownout.core.state.schedule_memory.MemoryCounters.decide:
-- window, quota, after/first/every, max_injections, max_concurrent, probability. Keys are built by the
-- caller (one Redis, not a cluster: the script touches keys it is not handed in KEYS).
--
-- ARGV[1] now (unix seconds), ARGV[2] lease TTL (s), ARGV[3] TTL of rule-wide keys (s); then per ask, 5 fields:
--   the rule: a JSON array the caller builds once per rule, [rule base key, session TTL (s), rule name, seed,
--     per_session, after, first, every, max_injections, max_concurrent, requests_per_min, tokens_per_min]
--     (false: none);
--   the session; the probability (empty: the window is closed); the quota window start (part of its key;
--   empty: no quota); the lease id (empty: no max_concurrent).
-- A session id longer than 64 bytes is keyed by its sha1 (the draw still uses the id itself).
-- Returns per ask 4 integers: code, the match number in the scope, the session's match index, and detail:
--   0 fired (detail 1: over the quota) | 1 window closed | 2 under the quota (detail: requests this minute)
--   3 after | 4 first (detail: k) | 5 every (detail: k) | 6 max_injections | 7 max_concurrent
--   8 probability (detail: the 52-bit draw)

local now = tonumber(ARGV[1])
local lease_ttl = tonumber(ARGV[2])
local rule_ttl = tonumber(ARGV[3])
local QUOTA_TTL = 120
local TWO52 = 4503599627370496
local SESSION_KEY_MAX = 64

local function admit(qkey)
  local r = redis.call('HINCRBY', qkey, 'r', 1)
  redis.call('EXPIRE', qkey, QUOTA_TTL)
  return r
end

local out = {}
local i = 4
while i <= #ARGV do
  local rbase, session_ttl, rule, seed, per_session, after, first, every, max_injections, max_concurrent, rpm, tpm =
    unpack(cjson.decode(ARGV[i]))
  local session, p, bucket, lease = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  i = i + 5
  local open = p ~= ''
  p = tonumber(p)
  local sk = session
  if #session > SESSION_KEY_MAX then sk = redis.sha1hex(session) end
  local sbase = rbase .. ':s:' .. sk

  local index = redis.call('INCR', sbase .. ':n')
  redis.call('EXPIRE', sbase .. ':n', session_ttl)
  local total = redis.call('INCR', rbase .. ':n')
  redis.call('EXPIRE', rbase .. ':n', rule_ttl)
  local base, ttl, n = rbase, rule_ttl, total
  if per_session then base, ttl, n = sbase, session_ttl, index end

  local code, detail = 0, 0
  if not open then
    code = 1
  else
    local qkey = nil
    local over = false
    if rpm or tpm then
      qkey = base .. ':q:' .. bucket
      local q = redis.call('HMGET', qkey, 'r', 't')
      local requests, tokens = tonumber(q[1]) or 0, tonumber(q[2]) or 0
      over = (rpm and requests >= rpm) or (tpm and tokens >= tpm) or false
      if not over then
        code, detail = 2, admit(qkey)
      end
    end
    if code == 0 then
      local k = n - after
      if k <= 0 then
        code = 3
      elseif first and k > first then
        code, detail = 4, k
      elseif every and k % every ~= 0 then
        code, detail = 5, k
      elseif max_injections and (tonumber(redis.call('GET', base .. ':i')) or 0) >= max_injections then
        code = 6
      else
        local lkey = base .. ':l'
        if max_concurrent then
          redis.call('ZREMRANGEBYSCORE', lkey, '-inf', now)
          if redis.call('ZCARD', lkey) >= max_concurrent then code = 7 end
        end
        if code == 0 and p < 1 then
          local key = seed .. '\31' .. rule .. '\31' .. session .. '\31' .. index .. '\31draw'
          local u = tonumber(string.sub(redis.sha1hex(key), 1, 13), 16)
          if u >= p * TWO52 then code, detail = 8, u end
        end
        if code == 0 then
          redis.call('INCR', base .. ':i')
          redis.call('EXPIRE', base .. ':i', ttl)
          if per_session then
            redis.call('INCR', rbase .. ':i')
            redis.call('EXPIRE', rbase .. ':i', rule_ttl)
          end
          if max_concurrent then
            redis.call('ZADD', lkey, now + lease_ttl, lease)
            redis.call('EXPIRE', lkey, math.ceil(lease_ttl) + 1)
          end
          if over then detail = 1 end
        end
      end
      -- A request the quota let through (skipped by a later check) reaches upstream: it uses the quota.
      if code ~= 0 and qkey then admit(qkey) end
    end
  end
  out[#out + 1] = code
  out[#out + 1] = n
  out[#out + 1] = index
  out[#out + 1] = detail
end
return out
