#!/usr/bin/env bash
# What statistics and the access log cost per request, measured like
# tests/bench/vs-nginx.sh: hlsedge with ONE worker, the whole process pinned
# to one CPU (so the control thread, which formats and writes the access
# log, is charged too), wrk pinned to another, requesting random playlists
# (the cheapest requests, so fixed per-request costs show most). For each
# run: server CPU-seconds (utime+stime of the process, /proc/<pid>/stat)
# per request. Modes, interleaved over ROUNDS rounds:
#   base   HE_STATS_DISABLE=1: no latency histograms, no access log
#   stats  latency histograms (the default), no access log
#   alog   histograms + access log, combined format, to a file
#   json   histograms + access log, JSON lines, to a file
# The counters that existed before (requests, status classes, bytes) are
# in every mode. Prints each run and the median per mode with its cost
# relative to base.
#
#   bash tests/bench/stats-cost.sh
#   ROUNDS=5 DURATION=20s MODES="base alog" bash tests/bench/stats-cost.sh
#
# Environment: ROUNDS=3 DURATION=10s WARMUP=2s CONNS=50 PORT=18090
# SERVER_CPU=0 CLIENT_CPU=1 LIBRARY=demo/library HLSEDGE=build/hlsedge
# MODES="base stats alog json" OUT=var/bench/stats-cost-<time>
# QUIET=1: before each run, wait (up to 15 min) until no other process
# uses more than 15% of a CPU and the machine is 85% idle, for shared
# machines; a run that was still disturbed shows in the spread of its mode.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNS=${CONNS:-50}
PORT=${PORT:-18090}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LIBRARY=${LIBRARY:-demo/library}
HLSEDGE=${HLSEDGE:-build/hlsedge}
MODES=${MODES:-"base stats alog json"}
OUT=${OUT:-var/bench/stats-cost-$(date +%Y%m%d-%H%M%S)}

die() { echo "stats-cost: $*" >&2; exit 1; }
for t in wrk taskset curl python3; do command -v "$t" >/dev/null || die "$t not found (scripts/setup.sh)"; done
[ -x "$HLSEDGE" ] || die "$HLSEDGE missing (scripts/build.sh)"
if [ ! -f "$LIBRARY/master.m3u8" ]; then bash scripts/make-demo.sh "$LIBRARY"; fi
ROOT=$(cd "$LIBRARY" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/hlsedge-stats-cost.XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
(cd "$ROOT" && find . -name '*.m3u8' -type f | sed 's|^\.||' | sort) >"$OUT/paths.txt"
CLK_TCK=$(getconf CLK_TCK)

cpu_ticks() { # utime + stime of a process, all threads
    local f
    read -r -a f <<<"$(cut -d')' -f2- "/proc/$1/stat")"
    echo $((f[11] + f[12]))
}

QUIET=${QUIET:-0}
wait_quiet() { # no other process above 15% CPU, 85% idle, three 2 s looks in a row
    local waited=0 i busy a b idle tot k
    while [ "$waited" -lt 900 ]; do
        for i in 1 2 3; do
            busy=$(ps -eo pcpu=,comm= --sort=-pcpu | awk '$1 > 15 && $2 != "ps" && $2 != "awk"' | head -1)
            [ -n "$busy" ] && break
            read -r -a a <<<"$(head -1 /proc/stat)"; sleep 2; read -r -a b <<<"$(head -1 /proc/stat)"
            idle=$((b[4] - a[4])); tot=0
            for k in 1 2 3 4 5 6 7 8; do tot=$((tot + b[k] - a[k])); done
            if [ $((idle * 100 / (tot ? tot : 1))) -lt 85 ]; then busy=idle; break; fi
        done
        [ -z "$busy" ] && return 0
        sleep 10; waited=$((waited + 10))
    done
    echo "stats-cost: machine still busy after 15 min; measuring anyway" >&2
}

run() { # run MODE ROUND
    local mode=$1 round=$2 conf="$TMP/hlsedge.yaml" env=() t0 t1 res
    {
        echo "listen: [\"127.0.0.1:$PORT\"]"
        echo "workers: 1"
        echo "cpus: [$SERVER_CPU]"
        echo "root: \"$ROOT\""
        echo "limits:"
        echo "  max_connections: 4096"
        echo "admin:"
        echo "  listen: \"off\""
        echo "log:"
        case "$mode" in
            alog) echo "  access: \"$TMP/access.log\"" ;;
            json) echo "  access: \"$TMP/access.log\""; echo "  access_format: json" ;;
            *) echo "  access: \"\"" ;;
        esac
    } >"$conf"
    [ "$mode" = base ] && env=(HE_STATS_DISABLE=1)
    [ "$QUIET" = 1 ] && wait_quiet
    rm -f "$TMP/access.log"
    env "${env[@]}" taskset -c "$SERVER_CPU" "$HLSEDGE" -c "$conf" >"$TMP/server.log" 2>&1 &
    PID=$!
    for _ in $(seq 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$PORT/master.m3u8" && break
        sleep 0.1
    done
    taskset -c "$CLIENT_CPU" wrk -t 1 -c "$CONNS" -d "$WARMUP" -s tests/bench/random-paths.lua \
        "http://127.0.0.1:$PORT" -- "$OUT/paths.txt" >/dev/null
    t0=$(cpu_ticks "$PID")
    taskset -c "$CLIENT_CPU" wrk -t 1 -c "$CONNS" -d "$DURATION" -s tests/bench/random-paths.lua \
        "http://127.0.0.1:$PORT" -- "$OUT/paths.txt" >"$TMP/wrk.txt"
    t1=$(cpu_ticks "$PID")
    kill "$PID"
    wait "$PID" || die "hlsedge ($mode) exited non-zero: $(tail -n 3 "$TMP/server.log")"
    PID=""
    res=$(grep '^WRK_RESULT ' "$TMP/wrk.txt") || die "no WRK_RESULT"
    local lines=0
    [ -f "$TMP/access.log" ] && lines=$(wc -l <"$TMP/access.log")
    printf '%s\t%s\t%s\tcpu_ticks=%s\tlog_lines=%s\tloadavg=%s\n' "$mode" "$round" "${res#WRK_RESULT }" \
        "$((t1 - t0))" "$lines" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/raw.tsv"
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) ($(nproc) CPUs)"
    echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "wrk: 1 thread, $CONNS connections, $DURATION per run on CPU $CLIENT_CPU; hlsedge on CPU $SERVER_CPU"
} | tee "$OUT/env.txt"
: >"$OUT/raw.tsv"
for r in $(seq "$ROUNDS"); do
    for m in $MODES; do run "$m" "$r"; done
done

python3 - "$OUT/raw.tsv" "$CLK_TCK" <<'PY' | tee "$OUT/results.txt"
import statistics, sys
raw, clk = sys.argv[1], int(sys.argv[2])
runs = {}
for line in open(raw):
    p = line.split("\t")
    kv = dict(f.split("=") for f in " ".join(p[2:]).split() if not f.startswith("loadavg="))
    req = int(kv["requests"])
    us = 1e6 * int(kv["cpu_ticks"]) / clk / req if req else float("nan")
    errs = sum(int(v) for k, v in kv.items() if k.startswith("err_"))
    runs.setdefault(p[0], []).append((us, req / (int(kv["duration_us"]) / 1e6), errs, int(kv["log_lines"])))
base = statistics.median(u for u, *_ in runs["base"]) if "base" in runs else None
print("%-6s %22s %10s %12s %8s" % ("mode", "CPU-us/request (runs)", "median", "vs base", "req/s"))
for m, rs in runs.items():
    med = statistics.median(u for u, *_ in rs)
    rel = "%+.2f%%" % (100 * (med / base - 1)) if base else "-"
    print("%-6s %22s %10.3f %12s %8.0f%s" % (m, " ".join("%.3f" % u for u, *_ in rs), med, rel,
          statistics.median(r for _, r, *_ in rs), "  ERRORS" if any(e for _, _, e, _ in rs) else ""))
PY
echo "stats-cost: results in $OUT"
