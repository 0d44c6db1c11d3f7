-- the usage filter as main shipped it at 4ea0b88 (src/gateway/usage.ts USAGE_LUA), kept for scripts/profile-usage-filter.mjs: the before of its before/after
local KEYS = 50000
local seen, nseen = {}, 0
SparkctlUsage = {}
SparkctlUsage.id = "sparkctl_usage"
SparkctlUsage.flags = filter.FLT_CFG_FL_HTX
SparkctlUsage.__index = SparkctlUsage
function SparkctlUsage:new()
  return setmetatable({ carry = "\n", chunks = 0, stream = false, p = nil, c = nil, ct = nil }, SparkctlUsage)
end
function SparkctlUsage:start_analyze(txn, chn)
  if chn:is_resp() then filter.register_data_filter(self, chn) end
end
function SparkctlUsage:http_headers(txn, msg)
  if msg:is_resp() then
    self.status = txn.f:status()
    local ct = msg:get_headers()["content-type"]
    if ct and ct[0] and string.find(ct[0], "text/event-stream", 1, true) then self.stream = true end
  end
end
function SparkctlUsage:http_payload(txn, msg)
  local b = msg:body()
  if not b or #b == 0 then return end
  if self.stream then
    -- an event starts a line (JSON inside one cannot hold a raw newline); the carry's last bytes join
    -- a "data:" cut between two pieces, and are too short to hold a whole one already counted
    local _, n = string.gsub(string.sub(self.carry, -5) .. b, "\ndata:", "")
    local _, d = string.gsub(string.sub(self.carry, -12) .. b, "\ndata: %[DONE%]", "")
    self.chunks = self.chunks + n - d
  end
  local s = self.carry .. b
  for u in string.gmatch(s, '"usage"%s*:%s*(%b{})') do
    local p = string.match(u, '"prompt_tokens"%s*:%s*(%d+)') or string.match(u, '"input_tokens"%s*:%s*(%d+)')
    local c = string.match(u, '"completion_tokens"%s*:%s*(%d+)') or string.match(u, '"output_tokens"%s*:%s*(%d+)')
    local ct = string.match(u, '"cached_tokens"%s*:%s*(%d+)')
    if p then self.p = p end
    if c then self.c = c end
    if ct then self.ct = ct end
  end
  self.carry = string.sub(s, -512)
end
function SparkctlUsage:http_end(txn, msg)
  if not msg:is_resp() then return filter.CONTINUE end
  local be = txn:get_var("txn.backend") or txn.f:be_name() or "-"
  local sv = txn.f:srv_name() or "-"
  local key = txn:get_var("txn.pkey")
  local route = "-"
  if key and sv ~= "-" and sv ~= "waker" then
    local k = be .. " " .. tostring(key)
    local last = seen[k]
    if last == nil then
      route = "new"
      if nseen >= KEYS then seen, nseen = {}, 0 end
      nseen = nseen + 1
    elseif last == sv then route = "hit" else route = "spill" end
    seen[k] = sv
  end
  local st = self.status or txn.f:status() or 0
  txn:log(core.info, "sparkctl-usage 1 " .. be .. " " .. sv .. " " .. tostring(st) .. " " .. (self.p or "-") .. " " .. (self.c or "-") .. " " .. (self.ct or "-") .. " " .. (self.stream and "1" or "0") .. " " .. self.chunks .. " " .. route)
  return filter.CONTINUE
end
core.register_filter("sparkctl_usage", SparkctlUsage, function(f, args) return f end)
