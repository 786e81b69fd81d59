-- wrk script for tests/bench/vs-nginx.sh: GET a random path from a list.
--   wrk ... -s random-paths.lua http://127.0.0.1:PORT -- PATHS_FILE [seq]
-- PATHS_FILE holds one absolute request path per line ("/720p/seg_00003.ts").
-- With "seq" the paths are walked in order instead, each once until the
-- list wraps.
-- The sequence is seeded per thread, so runs are repeatable. done() prints one
-- machine-readable WRK_RESULT line that vs-nginx.sh parses.

local paths = {}
local threads = {}

function setup(thread)
   table.insert(threads, thread)
   thread:set("id", #threads)
end

local walk = false
local next_path = 0

function init(args)
   local file = args[1]
   if not file then error("random-paths.lua: pass the paths file after --") end
   for line in io.lines(file) do
      if line ~= "" then paths[#paths + 1] = line end
   end
   if #paths == 0 then error("random-paths.lua: no paths in " .. file) end
   math.randomseed(7919 * (id or 1))
   -- "seq": each path once, in the file's order (cold cache misses), for
   -- one thread (wrk -t1); more would each walk the list from its start
   walk = args[2] == "seq"
end

function request()
   if walk then
      next_path = next_path % #paths + 1
      return wrk.format("GET", paths[next_path])
   end
   return wrk.format("GET", paths[math.random(#paths)])
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "WRK_RESULT requests=%d bytes=%d duration_us=%d p50_us=%d p99_us=%d max_us=%d " ..
      "err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d\n",
      summary.requests, summary.bytes, summary.duration,
      latency:percentile(50), latency:percentile(99), latency.max,
      e.connect, e.read, e.write, e.status, e.timeout))
end
