-- Decide every counted rule that matched one exchange, atomically: brownout's Redis schedule store.
--
-- The same checks, in the same order, as brownout.core.state.schedule_memory.MemoryCounters.decide:
-- window, quota, after/first/every, max_injections, max_concurrent, probability. Keys are built by the
-- caller (one Redis, not a cluster: the script touches keys it is not handed in KEYS).
--
-- ARGV[1] now (unix seconds), ARGV[2] lease TTL (s), ARGV[3] TTL of rule-wide keys (s); then per ask, 18 fields:
--   rule base key, session base key, session TTL (s), rule name, session, seed, per_session (1/0), open (1/0),
--   after, first, every, max_injections, max_concurrent, requests_per_min, tokens_per_min (empty: none),
--   quota window start (part of its key), probability, lease id.
-- Returns per ask 4 integers: code, the match number in the scope, the session's match index, and detail:
--   0 fired (detail 1: over the quota) | 1 window closed | 2 under the quota (detail: requests this minute)
--   3 after | 4 first (detail: k) | 5 every (detail: k) | 6 max_injections | 7 max_concurrent
--   8 probability (detail: the 52-bit draw)

local now = tonumber(ARGV[1])
local lease_ttl = tonumber(ARGV[2])
local rule_ttl = tonumber(ARGV[3])
local QUOTA_TTL = 120
local TWO52 = 4503599627370496

local function opt(s)
  if s == '' then return nil end
  return tonumber(s)
end

local function admit(qkey)
  local r = redis.call('HINCRBY', qkey, 'r', 1)
  redis.call('EXPIRE', qkey, QUOTA_TTL)
  return r
end

local out = {}
local i = 4
while i <= #ARGV do
  local rbase, sbase, session_ttl = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local rule, session, seed = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local per_session, open = ARGV[i + 6] == '1', ARGV[i + 7] == '1'
  local after, first, every = tonumber(ARGV[i + 8]), opt(ARGV[i + 9]), opt(ARGV[i + 10])
  local max_injections, max_concurrent = opt(ARGV[i + 11]), opt(ARGV[i + 12])
  local rpm, tpm = opt(ARGV[i + 13]), opt(ARGV[i + 14])
  local bucket, p, lease = ARGV[i + 15], tonumber(ARGV[i + 16]), ARGV[i + 17]
  i = i + 18

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
      over = (rpm ~= nil and requests >= rpm) or (tpm ~= nil and tokens >= tpm)
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
