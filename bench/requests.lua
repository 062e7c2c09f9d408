-- wrk script for bench/scale.py: replays a prepared list of requests and writes a JSON summary.
--
--   WRK_RESULT_FILE=out.json wrk -t T -c C -d Ds -s bench/requests.lua URL -- REQUESTS_FILE T
--
-- REQUESTS_FILE holds one request per line: METHOD <tab> PATH <tab> BODY <tab> HEADER: VALUE ...
-- (BODY may be empty). Thread n of T takes lines n, n+T, n+2T, ..., so every request is sent at most
-- once across threads until a thread runs out; it then wraps around and counts a "wrap" (a scenario whose
-- requests must be unique, such as booking a cell, then sees conflicts, and scale.py reports the wrap).

local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

local function split(line, sep)
  local parts = {}
  local start = 1
  while true do
    local i = string.find(line, sep, start, true)
    if not i then
      table.insert(parts, string.sub(line, start))
      return parts
    end
    table.insert(parts, string.sub(line, start, i - 1))
    start = i + 1
  end
end

local function prepare(line)
  local parts = split(line, "\t")
  local headers = {}
  for i = 4, #parts do
    local colon = string.find(parts[i], ": ", 1, true)
    headers[string.sub(parts[i], 1, colon - 1)] = string.sub(parts[i], colon + 2)
  end
  local body = parts[3]
  if body == "" then body = nil end
  return wrk.format(parts[1], parts[2], headers, body)
end

function init(args)
  requests_file = args[1]
  thread_count = tonumber(args[2])
  prepared = {}
  local n = 0
  for line in io.lines(requests_file) do
    if n % thread_count == id then
      table.insert(prepared, prepare(line))
    end
    n = n + 1
  end
  -- A scenario with fewer requests than threads (the all-branches summary has one) left a thread with
  -- none: its connections sent empty requests and waited for the timeout, so "concurrency 16" ran at 8
  -- (issue 21's summary anomaly). Such a thread shares every request instead.
  if #prepared == 0 then
    for line in io.lines(requests_file) do
      table.insert(prepared, prepare(line))
    end
  end
  index = 0
  wraps = 0
  statuses = {}
end

function request()
  index = index + 1
  if index > #prepared then
    index = 1
    wraps = wraps + 1
  end
  return prepared[index]
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local status_counts = {}
  local wrapped = 0
  for _, thread in ipairs(threads) do
    wrapped = wrapped + thread:get("wraps")
    local counts = thread:get("statuses")
    for code, count in pairs(counts) do
      status_counts[tostring(code)] = (status_counts[tostring(code)] or 0) + count
    end
  end
  local parts = {}
  for code, count in pairs(status_counts) do
    table.insert(parts, string.format('"%s": %d', code, count))
  end
  local out = io.open(result_file_path(), "w")
  out:write(string.format(
    '{"requests": %d, "duration_us": %d, "errors": {"connect": %d, "read": %d, "write": %d, "timeout": %d, "status": %d}, ' ..
    '"latency_us": {"p50": %d, "p95": %d, "p99": %d, "mean": %.1f, "max": %d}, "statuses": {%s}, "wraps": %d}\n',
    summary.requests, summary.duration,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout, summary.errors.status,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.mean, latency.max,
    table.concat(parts, ", "), wrapped
  ))
  out:close()
end

function result_file_path()
  -- done() runs in the main script state, which did not see init()'s args: read them from the environment.
  return os.getenv("WRK_RESULT_FILE")
end
