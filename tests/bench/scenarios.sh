#!/usr/bin/env bash
# Scenario benchmarks with hlsedge-loadgen: hlsedge and Debian's nginx serve
# the same library on 127.0.0.1, each with ONE worker pinned to SERVER_CPU,
# loadgen (one thread) pinned to CLIENT_CPU, one server at a time.
#
#   sudo chrt -f 10 bash tests/bench/scenarios.sh      (what docs/performance.md used)
#   SCENARIOS=linerate REPEAT=1 DURATION=5 bash tests/bench/scenarios.sh
#   TLS=1 SCENARIOS="linerate sweep" bash tests/bench/scenarios.sh
#
# Scenarios (SCENARIOS, in this order):
#   linerate  HLS viewers at line rate (LR_VIEWERS, LR_RENDITION):
#             Gbit/s and server CPU-seconds per GB
#   realtime  RT_VIEWERS real-time HLS viewers over the 5 renditions
#             (RT_RENDITION): stall ratio, p99 TTFB, server CPU (CPU-s and %
#             of one core)
#   sweep     loadgen --sweep SW_RANGE --sla-ms SLA_MS in URL-list mode, for
#             each set in SWEEPS ("SET:SLA_ON", SET = playlists | segments,
#             SLA_ON = total | ttfb): the highest requests/s whose p99 stays
#             within the SLA
# Every measured run is repeated REPEAT times (servers alternate which goes
# first); tables show medians, with hlsedge/nginx ratios.
#
# Server CPU: utime+stime of the server's processes (/proc/<pid>/stat; nginx:
# master + worker) over the run. On loopback this includes the receive-side
# TCP work for the client's socket, which the kernel does in the sender's
# context. "cpu0 busy" is the busy time of the server's CPU from /proc/stat
# (adds softirq work done outside the process, and anything else that ran
# there). Run it under "chrt -f 10" (SCHED_FIFO, inherited by the servers and
# loadgen) on a shared machine, so that other work cannot take the measured
# CPUs.
#
# Environment:
#   SERVERS="hlsedge nginx"   which servers
#   SCENARIOS="linerate realtime sweep"
#   REPEAT=3                  measured runs per scenario and server
#   FIRST_ROUND=1             number of the first round (seed and file names;
#                             FIRST_ROUND=3 REPEAT=3 runs round 3 only)
#   DURATION=20               loadgen -d of a linerate run (seconds)
#   WARMUP=2                  unmeasured loadgen run before linerate and each
#                             sweep (seconds; 0 = none)
#   LR_VIEWERS=100 LR_RENDITION=mix:1,1,1,1,1
#   RT_VIEWERS=1000 RT_RENDITION=mix:1,1,1,1,1 RT_DURATION=30 RT_BUFFER=12
#   SW_RANGE=100:500:100 SLA_MS=10 SW_DURATION=10 (per sweep point)
#   SWEEPS="playlists:total segments:ttfb"
#   TLS=0                     1: HTTPS on the measured port (self-signed
#                             P-256; hlsedge without kTLS on kernels that lack it)
#   PORTS="18080 18081"       hlsedge port, nginx port
#   SERVER_CPU=0 CLIENT_CPU=1
#   LIBRARY=demo/library      made with scripts/make-demo.sh when missing
#   HLSEDGE=build/hlsedge LOADGEN=build/hlsedge-loadgen (built when missing)
#   OUT=var/bench/scenarios-<time>
# Loopback only; every loadgen run is bounded by -d; servers are stopped on exit.
#   REPORT_ONLY=DIR           only (re)write DIR/results.txt from DIR's raw data
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_DIR="$REPO/tests/bench"
BENCH_NAME=scenarios
cd "$REPO"
# shellcheck source=tests/bench/lib.sh
. "$BENCH_DIR/lib.sh"

SERVERS=${SERVERS:-"hlsedge nginx"}
SCENARIOS=${SCENARIOS:-"linerate realtime sweep"}
REPEAT=${REPEAT:-3}
FIRST_ROUND=${FIRST_ROUND:-1}
DURATION=${DURATION:-20}
WARMUP=${WARMUP:-2}
LR_VIEWERS=${LR_VIEWERS:-100}
LR_RENDITION=${LR_RENDITION:-mix:1,1,1,1,1}
RT_VIEWERS=${RT_VIEWERS:-1000}
RT_RENDITION=${RT_RENDITION:-mix:1,1,1,1,1}
RT_DURATION=${RT_DURATION:-30}
RT_BUFFER=${RT_BUFFER:-12}
SW_RANGE=${SW_RANGE:-100:500:100}
SLA_MS=${SLA_MS:-10}
SW_DURATION=${SW_DURATION:-10}
SWEEPS=${SWEEPS:-"playlists:total segments:ttfb"}
TLS=${TLS:-0}
PORTS=${PORTS:-"18080 18081"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LIBRARY=${LIBRARY:-demo/library}
HLSEDGE=${HLSEDGE:-build/hlsedge}
LOADGEN=${LOADGEN:-build/hlsedge-loadgen}
OUT=${OUT:-var/bench/scenarios-$(date +%Y%m%d-%H%M%S)}
CC_M3U8="no-cache"
CC_TS="public, max-age=31536000, immutable"

# write_report: OUT/results.txt and OUT/results.json from OUT/raw.tsv and the
# per-run JSON (medians over the runs, hlsedge/nginx ratios).
write_report() {
python3 - "$OUT" "$(getconf CLK_TCK)" "$SLA_MS" "$SW_DURATION" >"$OUT/results.txt" <<'PY'
import json, os, statistics, sys

out, clk, sla, swd = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
runs = {}  # (scenario, server) -> [row]
order = []
for line in open(os.path.join(out, "raw.tsv")):
    parts = line.rstrip("\n").split("\t")
    scen, server, rep = parts[0], parts[1], int(parts[2])
    kv = dict(f.split("=", 1) for f in parts[3:])
    j = json.load(open(os.path.join(out, kv["json"])))
    wall = float(kv["wall_s"])
    cpu = int(kv["server_ticks"]) / clk
    cpu0 = int(kv["cpu0_busy_ticks"]) / clk
    si = int(kv["cpu0_softirq_ticks"]) / clk
    cpu1 = int(kv["cpu1_busy_ticks"]) / clk
    client = float(kv["client_cpu_s"])
    r = {"rep": rep, "wall_s": wall, "server CPU-s": cpu, "server CPU %": 100 * cpu / wall,
         "cpu0 busy %": 100 * cpu0 / wall, "cpu0 softirq-s": si, "client CPU %": 100 * client / wall,
         "cpu1 busy %": 100 * cpu1 / wall}
    if "sweep" in j:
        pts = j["sweep"]
        ok = [p for p in pts if not p["errors"] and p["p99_ms"] <= sla]
        best = max(ok, key=lambda p: p["requests_per_s"]) if ok else None
        top = max(pts, key=lambda p: p["requests_per_s"])
        reqs = sum(p["requests_per_s"] * swd for p in pts)
        gb = sum(p["gbit_per_s"] / 8 * swd for p in pts)
        r.update({
            "best req/s": best["requests_per_s"] if best else 0.0,
            "best conns": best["clients"] if best else 0,
            "best p99 ms": best["p99_ms"] if best else float("nan"),
            "best Gbit/s": best["gbit_per_s"] if best else 0.0,
            "max req/s": top["requests_per_s"], "p99 at max ms": top["p99_ms"],
            "CPU-s/1k req": 1000 * cpu / reqs if reqs else float("nan"),
            "CPU-s/GB": cpu / gb if gb else float("nan"),
            "errors": sum(p["errors"] for p in pts),
            "points": {p["clients"]: p for p in pts},
        })
    else:
        gb = j["bytes"] / 1e9
        req = j["requests"]
        r.update({
            "Gbit/s": j["gbit_per_s"], "req/s": j["requests_per_s"], "viewers": j["clients"],
            "p99 TTFB ms": j["ttfb"]["p99_ms"], "p99 seg ms": j["segment_download"]["p99_ms"],
            "stall ratio %": 100 * j.get("stall_ratio", 0.0), "stalls": j.get("stalls", 0),
            "startup ms": j.get("startup_mean_ms", 0.0),
            "CPU-s/GB": cpu / gb if gb else float("nan"),
            "GB/CPU-s": gb / cpu if cpu else float("nan"),
            "CPU-s/1k req": 1000 * cpu / req if req else float("nan"),
            "busy-s/GB": cpu0 / gb if gb else float("nan"),
            "client GB/CPU-s": gb / client if client else float("nan"),
            "errors": j["errors"], "requests": req, "bytes": j["bytes"],
        })
    key = (scen, server)
    if key not in runs:
        runs[key] = []
        order.append(key)
    runs[key].append(r)


def med(rows, k):
    vals = [r[k] for r in rows if k in r and r[k] == r[k]]
    return statistics.median(vals) if vals else float("nan")


def fmt(v):
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "-"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 0.1:
        return f"{v:.3f}"
    return f"{v:.5f}"


COLS = {
    "linerate": ["Gbit/s", "req/s", "p99 TTFB ms", "server CPU-s", "server CPU %", "CPU-s/GB",
                 "GB/CPU-s", "CPU-s/1k req", "cpu0 busy %", "busy-s/GB", "client CPU %", "errors"],
    "realtime": ["viewers", "Gbit/s", "req/s", "stall ratio %", "stalls", "p99 TTFB ms", "p99 seg ms",
                 "startup ms", "server CPU-s", "server CPU %", "CPU-s/GB", "cpu0 busy %", "client CPU %", "errors"],
    "sweep": ["best req/s", "best conns", "best p99 ms", "best Gbit/s", "max req/s", "p99 at max ms",
              "server CPU %", "CPU-s/1k req", "CPU-s/GB", "client CPU %", "errors"],
}
# Ratios hlsedge/nginx: throughput and efficiency > 1 favour hlsedge; costs,
# latency and stalls < 1 favour hlsedge.
RATIOS = {
    "linerate": ["Gbit/s", "req/s", "p99 TTFB ms", "CPU-s/GB", "GB/CPU-s", "CPU-s/1k req", "busy-s/GB"],
    "realtime": ["stall ratio %", "p99 TTFB ms", "p99 seg ms", "server CPU-s", "server CPU %", "CPU-s/GB"],
    "sweep": ["best req/s", "max req/s", "p99 at max ms", "CPU-s/1k req"],
}
TITLES = {
    "linerate": "line rate: HLS viewers as fast as possible",
    "realtime": "real-time viewers over 5 renditions",
    "sweep": "SLA sweep",
}

print(open(os.path.join(out, "env.txt")).read().rstrip())
print()
print("Medians of %s runs per server. server CPU: utime+stime of the server (CLK_TCK=%d; nginx: master+worker),"
      % ("/".join(sorted({str(len(v)) for v in runs.values()})), clk))
print("incl. the loopback receive work charged to the sender; cpu0 busy: the server CPU's busy time (/proc/stat).")
print("GB = 1e9 bytes received by loadgen (headers + bodies); CPU % = of one core.")
result = {}
scens = []
for s, _ in order:
    if s not in scens:
        scens.append(s)
for scen in scens:
    kind = "sweep" if scen.startswith("sweep") else scen
    cols = COLS[kind]
    servers = [sv for (sc, sv) in order if sc == scen]
    title = TITLES[kind]
    if kind == "sweep":
        _, sset, on = scen.split("-")
        title += f" over {sset}: highest req/s with p99 ({on}) <= {sla:g} ms"
    print()
    print(f"== {scen}: {title}")
    w = max(12, max(len(c) for c in cols) + 2)
    print("%-9s" % "server" + "".join(c.rjust(w) for c in cols))
    result[scen] = {}
    for sv in servers:
        rows = runs[(scen, sv)]
        m = {c: med(rows, c) for c in cols}
        result[scen][sv] = {"median": m, "runs": [{k: v for k, v in r.items() if k != "points"} for r in rows]}
        print("%-9s" % sv + "".join(fmt(m[c]).rjust(w) for c in cols))
    if kind == "sweep":
        conns = sorted({c for sv in servers for r in runs[(scen, sv)] for c in r["points"]})
        print("  per point (median req/s | p99 ms):")
        for sv in servers:
            rows = runs[(scen, sv)]
            cells = []
            pts = {}
            for c in conns:
                rps = statistics.median([r["points"][c]["requests_per_s"] for r in rows if c in r["points"]])
                p99 = statistics.median([r["points"][c]["p99_ms"] for r in rows if c in r["points"]])
                pts[c] = {"req/s": rps, "p99 ms": p99}
                cells.append(f"{c}: {rps:.0f} | {p99:.2f}")
            result[scen][sv]["points"] = pts
            print("    %-8s " % sv + "   ".join(cells))
        for sv in servers:
            if not any(r["best req/s"] for r in runs[(scen, sv)]):
                print(f"  note: {sv}: no point met p99 <= {sla:g} ms in any run")
    if "hlsedge" in servers and "nginx" in servers:
        a = result[scen]["hlsedge"]["median"]
        b = result[scen]["nginx"]["median"]
        rc = RATIOS[kind]
        vals = [a[c] / b[c] if b[c] and b[c] == b[c] else float("nan") for c in rc]
        result[scen]["ratio hlsedge/nginx"] = dict(zip(rc, vals))
        print("  ratios hlsedge/nginx of the medians:")
        print("%-9s" % "" + "".join(c.rjust(w) for c in rc))
        print("%-9s" % "ratio" + "".join(("%.3f" % v if v == v else "-").rjust(w) for v in vals))
    for sv in servers:
        for r in runs[(scen, sv)]:
            if r["errors"]:
                print(f"WARNING: {sv} {scen} run {r['rep']}: {r['errors']} errors")
            if kind == "linerate" and r["server CPU %"] < 90:
                print(f"note: {sv} {scen} run {r['rep']}: server CPU {r['server CPU %']:.0f}% < 90%: "
                      "not saturated, compare the per-CPU-second columns")
json.dump(result, open(os.path.join(out, "results.json"), "w"), indent=1, default=str)
PY
}

if [ -n "${REPORT_ONLY:-}" ]; then
    [ -f "$REPORT_ONLY/raw.tsv" ] && [ -f "$REPORT_ONLY/env.txt" ] || bench_die "REPORT_ONLY: no raw.tsv/env.txt in $REPORT_ONLY"
    OUT=$(cd "$REPORT_ONLY" && pwd)
    SW_DURATION=$(sed -n 's/^sweep: .* \([0-9.]*\)s per point$/\1/p' "$OUT/env.txt")
    SW_DURATION=${SW_DURATION:-10}
    SLA_MS=$(sed -n 's/^sweep: .* sla=\([0-9.]*\)ms .*/\1/p' "$OUT/env.txt")
    SLA_MS=${SLA_MS:-10}
    write_report
    cat "$OUT/results.txt"
    exit 0
fi

read -r HLSEDGE_PORT NGINX_PORT <<<"$PORTS"
[ -n "${NGINX_PORT:-}" ] || bench_die "PORTS needs two ports: \"HLSEDGE_PORT NGINX_PORT\""
for s in $SERVERS; do
    case "$s" in hlsedge|nginx) ;; *) bench_die "unknown server in SERVERS: $s" ;; esac
done
for s in $SCENARIOS; do
    case "$s" in linerate|realtime|sweep) ;; *) bench_die "unknown scenario in SCENARIOS: $s" ;; esac
done
for s in $SWEEPS; do
    case "$s" in playlists:total|playlists:ttfb|segments:total|segments:ttfb) ;;
        *) bench_die "bad SWEEPS entry: $s (SET:SLA_ON, SET = playlists|segments, SLA_ON = total|ttfb)" ;;
    esac
done
isnum() { [[ "$1" =~ ^[0-9]+([.][0-9]+)?$ ]]; }
for v in REPEAT DURATION WARMUP LR_VIEWERS RT_VIEWERS RT_DURATION RT_BUFFER SLA_MS SW_DURATION; do
    isnum "${!v}" || bench_die "$v must be a number (got '${!v}')"
done
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || bench_die "REPEAT must be a whole number >= 1"
[[ "$FIRST_ROUND" =~ ^[1-9][0-9]*$ ]] && [ "$FIRST_ROUND" -le "$REPEAT" ] ||
    bench_die "FIRST_ROUND must be a whole number from 1 to REPEAT"
[[ "$SW_RANGE" =~ ^[0-9]+:[0-9]+(:[0-9]+)?$ ]] || bench_die "SW_RANGE must be START:END[:STEP]"
case "$TLS" in 0|1) ;; *) bench_die "TLS must be 0 or 1" ;; esac
ncpu=$(nproc --all)
[ "$SERVER_CPU" -lt "$ncpu" ] && [ "$CLIENT_CPU" -lt "$ncpu" ] ||
    bench_die "SERVER_CPU/CLIENT_CPU must be < $ncpu"
[ "$SERVER_CPU" != "$CLIENT_CPU" ] || bench_log "warning: server and client share CPU $SERVER_CPU"
for t in taskset curl python3 ss; do
    command -v "$t" >/dev/null || bench_die "$t not found (run scripts/setup.sh)"
done
[ -x /usr/bin/time ] || bench_die "/usr/bin/time not found (Debian package time)"

# ---------------------------------------------------------------- inputs
if [ ! -f "$LIBRARY/master.m3u8" ] || [ ! -f "$LIBRARY/.hlsedge-demo" ]; then
    bench_log "library $LIBRARY missing or incomplete; making it"
    bash scripts/make-demo.sh "$LIBRARY"
fi
ROOT=$(cd "$LIBRARY" && pwd)
if [ ! -x "$LOADGEN" ] || { [[ " $SERVERS " == *" hlsedge "* ]] && [ ! -x "$HLSEDGE" ]; }; then
    bench_log "$HLSEDGE or $LOADGEN missing; building"
    bash scripts/build.sh
fi
[ -x "$LOADGEN" ] || bench_die "$LOADGEN missing (cmake --build build --target hlsedge-loadgen)"
if [[ " $SERVERS " == *" hlsedge "* ]]; then
    [ -x "$HLSEDGE" ] || bench_die "$HLSEDGE missing"
fi
if [[ " $SERVERS " == *" nginx "* ]]; then
    command -v nginx >/dev/null || bench_die "nginx not found (run scripts/setup.sh)"
fi
MAX_CONNS=$((RT_VIEWERS * 2 > 4096 ? RT_VIEWERS * 2 : 4096))
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/hlsedge-scenarios.XXXXXX)

(cd "$ROOT" && find . -name '*.ts' -type f | sed 's|^\.||' | sort) >"$OUT/paths-segments.txt"
(cd "$ROOT" && find . -name '*.m3u8' -type f | sed 's|^\.||' | sort) >"$OUT/paths-playlists.txt"
nseg=$(wc -l <"$OUT/paths-segments.txt")
npl=$(wc -l <"$OUT/paths-playlists.txt")
[ "$nseg" -gt 0 ] && [ "$npl" -gt 0 ] || bench_die "no .ts or .m3u8 files under $ROOT"
lib_bytes=$(du -sb "$ROOT" | cut -f1)

# ---------------------------------------------------------------- cleanup
LG_PID=""
cleanup() {
    stop_pid "$LG_PID" KILL
    stop_pid "$SERVER_PID" TERM
    if [ -n "${KEEP_TMP:-}" ]; then bench_log "temp dir kept: $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- runs
# run_loadgen JSON_OUT TIME_OUT ARGS...: loadgen pinned to CLIENT_CPU, its
# CPU time from /usr/bin/time ("user sys elapsed").
run_loadgen() {
    local json=$1 tf=$2 rc=0
    shift 2
    taskset -c "$CLIENT_CPU" /usr/bin/time -f '%U %S %e' -o "$tf" \
        "$LOADGEN" --json -q -t 1 --cpus "$CLIENT_CPU" "$@" >"$json" 2>"$json.err" &
    LG_PID=$!
    wait "$LG_PID" || rc=$?
    LG_PID=""
    # exit 1 = errors happened: kept and reported; anything else is fatal
    [ $rc = 0 ] || [ $rc = 1 ] || bench_die "loadgen failed (rc $rc): $(tail -n 5 "$json.err")"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$json" 2>/dev/null ||
        bench_die "loadgen wrote no JSON: $(tail -n 5 "$json.err")"
}

# run_summary JSON: one line about a loadgen run, for the progress log.
run_summary() {
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
if "sweep" in j:
    b = j.get("best")
    print(" ".join("%d:%.0f/s,p99=%.1fms" % (p["clients"], p["requests_per_s"], p["p99_ms"]) for p in j["sweep"]))
else:
    print("%.2f Gbit/s, %.0f req/s, p99 ttfb %.1f ms, stall ratio %.5f, errors %d" %
          (j["gbit_per_s"], j["requests_per_s"], j["ttfb"]["p99_ms"], j.get("stall_ratio", 0), j["errors"]))
' "$1"
}

# measure SERVER SCENARIO REP ARGS...: one measured loadgen run; appends a
# line to raw.tsv.
measure() {
    local server=$1 scen=$2 rep=$3 pids t0 t1 b0 b1 s0 s1 c0 c1 w0 w1
    shift 3
    local json="$OUT/$scen-$server-r$rep.json" tf="$TMP/time"
    # shellcheck disable=SC2207
    pids=($(server_pids "$SERVER_PID"))
    w0=$(date +%s.%N)
    t0=$(cpu_ticks "${pids[@]}")
    b0=$(cpu_busy_ticks "$SERVER_CPU")
    s0=$(cpu_softirq_ticks "$SERVER_CPU")
    c0=$(cpu_busy_ticks "$CLIENT_CPU")
    run_loadgen "$json" "$tf" "$@"
    t1=$(cpu_ticks "${pids[@]}")
    b1=$(cpu_busy_ticks "$SERVER_CPU")
    s1=$(cpu_softirq_ticks "$SERVER_CPU")
    c1=$(cpu_busy_ticks "$CLIENT_CPU")
    w1=$(date +%s.%N)
    kill -0 "$SERVER_PID" 2>/dev/null || bench_die "$server exited during $scen"
    read -r cu cs _ <"$tf"
    printf '%s\t%s\t%s\twall_s=%s\tserver_ticks=%s\tcpu0_busy_ticks=%s\tcpu0_softirq_ticks=%s\tcpu1_busy_ticks=%s\tclient_cpu_s=%s\tjson=%s\n' \
        "$scen" "$server" "$rep" "$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.3f", b - a }')" "$((t1 - t0))" "$((b1 - b0))" \
        "$((s1 - s0))" "$((c1 - c0))" "$(awk -v a="$cu" -v b="$cs" 'BEGIN { printf "%.2f", a + b }')" "$(basename "$json")" >>"$OUT/raw.tsv"
    bench_log "$server $scen #$rep: $(run_summary "$json"), server CPU $((t1 - t0)) ticks"
}

url_file() { # url_file SET -> path of a URL list for the current server
    local uf="$TMP/urls-$1-$PORT.txt"
    sed "s|^|$SCHEME://127.0.0.1:$PORT|" "$OUT/paths-$1.txt" >"$uf"
    echo "$uf"
}

run_scenarios() { # run_scenarios SERVER REP
    local server=$1 rep=$2 k master set on uf
    k=(); [ "$TLS" = 1 ] && k=(-k)
    master="$SCHEME://127.0.0.1:$PORT/master.m3u8"
    for scen in $SCENARIOS; do
        case "$scen" in
            linerate)
                if [ "$WARMUP" != 0 ]; then
                    run_loadgen "$TMP/warmup.json" "$TMP/warmup.time" "${k[@]}" --viewers "$LR_VIEWERS" \
                        --pace linerate --rendition "$LR_RENDITION" -d "$WARMUP" "$master"
                fi
                measure "$server" linerate "$rep" "${k[@]}" --viewers "$LR_VIEWERS" --pace linerate \
                    --rendition "$LR_RENDITION" --seed "$rep" -d "$DURATION" "$master"
                ;;
            realtime)
                measure "$server" realtime "$rep" "${k[@]}" --viewers "$RT_VIEWERS" --pace realtime \
                    --rendition "$RT_RENDITION" --buffer "$RT_BUFFER" --seed "$rep" -d "$RT_DURATION" "$master"
                ;;
            sweep)
                for s in $SWEEPS; do
                    set=${s%%:*} on=${s##*:}
                    uf=$(url_file "$set")
                    if [ "$WARMUP" != 0 ]; then
                        run_loadgen "$TMP/warmup.json" "$TMP/warmup.time" "${k[@]}" --mode urls \
                            -c "${SW_RANGE%%:*}" -d "$WARMUP" --url-file "$uf"
                    fi
                    measure "$server" "sweep-$set-$on" "$rep" "${k[@]}" --mode urls --sweep "$SW_RANGE" \
                        --sla-ms "$SLA_MS" --sla-on "$on" --seed "$rep" -d "$SW_DURATION" --url-file "$uf"
                done
                ;;
        esac
    done
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "loadavg at start: $(cut -d" " -f1-3 /proc/loadavg)"
    echo "scheduling: $(sched_policy) (inherited by servers and loadgen)"
    echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) ($ncpu CPUs)"
    echo "nginx: $(nginx -v 2>&1 | sed 's/.*: //')"
    echo "hlsedge: $HLSEDGE; loadgen: $LOADGEN (one thread on CPU $CLIENT_CPU)"
    echo "servers: $SERVERS, one worker on CPU $SERVER_CPU; tls: $TLS"
    echo "scenarios: $SCENARIOS; rounds: $FIRST_ROUND..$REPEAT"
    echo "linerate: viewers=$LR_VIEWERS rendition=$LR_RENDITION duration=${DURATION}s warmup=${WARMUP}s"
    echo "realtime: viewers=$RT_VIEWERS rendition=$RT_RENDITION duration=${RT_DURATION}s buffer=${RT_BUFFER}s"
    echo "sweep: $SW_RANGE sla=${SLA_MS}ms sets=$SWEEPS ${SW_DURATION}s per point"
    echo "library: $ROOT ($nseg segments, $npl playlists, $lib_bytes bytes)"
} >"$OUT/env.txt"
: >"$OUT/raw.tsv"

# Warm the page cache so that neither server pays for disk reads.
find "$ROOT" -type f -exec cat {} + >/dev/null

for ((rep = FIRST_ROUND; rep <= REPEAT; rep++)); do
    order=$SERVERS
    # alternate which server goes first
    if [ $((rep % 2)) = 0 ]; then order=$(echo "$SERVERS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for server in $order; do
        bench_log "round $rep/$REPEAT: starting $server"
        "start_$server"
        check_responses "$server" "$PORT" "$OUT/paths-segments.txt" "$OUT/paths-playlists.txt"
        run_scenarios "$server" "$rep"
        stop_server "$server" "-r$rep"
    done
done
echo "loadavg at end: $(cut -d" " -f1-3 /proc/loadavg)" >>"$OUT/env.txt"

write_report
cat "$OUT/results.txt"
echo
echo "scenarios: results in $OUT/results.txt (results.json, raw.tsv, per-run JSON, configs)"
