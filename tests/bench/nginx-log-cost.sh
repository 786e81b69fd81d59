#!/usr/bin/env bash
# What nginx's access log costs per request, measured the way
# tests/bench/stats-cost.sh measures hlsedge's (TOGGLE=1), for a side by
# side: nginx 1.22 tuned as in vs-nginx.sh (tests/bench/nginx.conf.in), one
# worker on SERVER_CPU, wrk on CLIENT_CPU requesting random playlists, and
# the log switched by rewriting nginx.conf and a reload between slices.
# States:
#   nolog   access_log off (as in vs-nginx.sh)
#   alog    access_log FILE combined buffer=512k flush=1s: nginx's batching,
#           the closest to hlsedge's 1 MiB batches
#   alogu   access_log FILE combined: nginx's default, one write(2) per request
# nginx formats and writes in its worker, so the figure is the worker's
# time on CPU per request (/proc/PID/schedstat, exact to the ns; each
# reload starts a new worker, found by its parent). Each slice ends 1.2 s
# after the load, so the buffered log's last flush (flush=1s) is counted.
# The log file is deleted after each slice, as stats-cost.sh does.
#
#   RUNS=3 ROUNDS=12 chrt -r 10 bash tests/bench/nginx-log-cost.sh
#
# Environment: RUNS=1 ROUNDS=12 SLICE=2s CONNS=50 PORT=18095 SERVER_CPU=0
# CLIENT_CPU=1 MODES="nolog alog alogu" LIBRARY=demo/library
# OUT=var/bench/nginx-log-cost-<time>
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
BENCH_DIR=$REPO/tests/bench
BENCH_NAME=nginx-log-cost
RUNS=${RUNS:-1}
ROUNDS=${ROUNDS:-12}
SLICE=${SLICE:-2s}
CONNS=${CONNS:-50}
NGINX_PORT=${PORT:-18095}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
MODES=${MODES:-"nolog alog alogu"}
LIBRARY=${LIBRARY:-demo/library}
CC_M3U8="public, max-age=1"
CC_TS="public, max-age=86400, immutable"
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
OUT=${OUT:-var/bench/nginx-log-cost-$(date +%Y%m%d-%H%M%S)}

for t in nginx wrk taskset curl python3; do command -v "$t" >/dev/null || bench_die "$t not found (scripts/setup.sh)"; done
if [ ! -f "$LIBRARY/master.m3u8" ]; then bash scripts/make-demo.sh "$LIBRARY"; fi
ROOT=$(cd "$LIBRARY" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/hlsedge-nginx-log-cost.XXXXXX)
cleanup() {
    [ -n "$SERVER_PID" ] && stop_pid "$SERVER_PID"
    rm -rf "$TMP"
}
trap cleanup EXIT
(cd "$ROOT" && find . -name '*.m3u8' -type f | sed 's|^\.||' | sort) >"$OUT/paths.txt"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  kernel: $(uname -r)  nginx: $(nginx -v 2>&1 | sed 's/.*: //')"
    echo "modes: $MODES; $ROUNDS rounds of $SLICE per mode; wrk 1 thread, $CONNS connections on CPU $CLIENT_CPU; nginx worker on CPU $SERVER_CPU"
} | tee "$OUT/env.txt"
: >"$OUT/raw.tsv"

worker_pid() { pgrep -P "$SERVER_PID" | head -n 1; }
set_state() { # set_state MODE NAME: rewrite the access_log line, reload, wait for the new worker
    local old new line
    case $1 in
        nolog) line="access_log off;" ;;
        alog) line="access_log $TMP/$2.log combined buffer=512k flush=1s;" ;;
        alogu) line="access_log $TMP/$2.log combined;" ;;
        *) bench_die "unknown mode $1" ;;
    esac
    old=$(worker_pid)
    sed -i "s|^    access_log .*|    $line|" "$TMP/nginx.conf"
    kill -HUP "$SERVER_PID"
    for _ in $(seq 100); do
        new=$(worker_pid)
        [ -n "$new" ] && [ "$new" != "$old" ] && ! kill -0 "$old" 2>/dev/null && break
        sleep 0.05
    done
    [ -n "$new" ] && [ "$new" != "$old" ] || bench_die "no new worker after reload"
    curl -sf -o /dev/null "http://127.0.0.1:$NGINX_PORT/master.m3u8"
    echo "$new"
}
load() { # load DURATION -> requests
    taskset -c "$CLIENT_CPU" wrk -t 1 -c "$CONNS" -d "$1" -s tests/bench/random-paths.lua \
        "http://127.0.0.1:$NGINX_PORT" -- "$OUT/paths.txt" >"$TMP/wrk.txt" 2>&1 ||
        bench_die "wrk failed: $(tail -n 3 "$TMP/wrk.txt")"
    grep '^WRK_RESULT ' "$TMP/wrk.txt" | sed 's/.*requests=\([0-9]*\).*/\1/'
}
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

read -r -a MODELIST <<<"$MODES"
NM=${#MODELIST[@]}
for run in $(seq "$RUNS"); do
    start_nginx
    load 2s >/dev/null
    for r in $(seq "$ROUNDS"); do
        for k in $(seq 0 $((NM - 1))); do
            m=${MODELIST[$(((r + k) % NM))]}
            wp=$(set_state "$m" "$run.$r.$m")
            read -r ns0 _ <"/proc/$wp/schedstat"
            req=$(load "$SLICE")
            sleep 1.2 # flush=1s
            read -r ns1 _ <"/proc/$wp/schedstat"
            l=$(lines "$TMP/$run.$r.$m.log")
            if [ "$m" = nolog ] && [ "$l" != 0 ]; then bench_die "log still on in state nolog"; fi
            if [ "$m" != nolog ] && [ "$l" -lt "$req" ]; then bench_die "$m: $l lines for $req requests"; fi
            printf '%s\t%s\trequests=%s\tworker_ns=%s\tloadavg=%s\n' "$m" "$run.$r" "$req" \
                "$((ns1 - ns0))" "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/raw.tsv"
            rm -f "$TMP/$run.$r.$m.log"
        done
    done
    stop_pid "$SERVER_PID"
    SERVER_PID=""
done
python3 - "$OUT/raw.tsv" <<'PY' | tee "$OUT/results.txt"
import statistics, sys
per = {}
for line in open(sys.argv[1]):
    p = line.rstrip("\n").split("\t")
    kv = dict(f.split("=") for f in p[2:])
    per.setdefault((p[1].split(".")[0], p[0]), []).append(int(kv["worker_ns"]) / int(kv["requests"]))
runs = sorted({r for r, _ in per})
modes = list(dict.fromkeys(m for _, m in per))
med = lambda r, m: statistics.median(per[(r, m)])
print("nginx worker CPU ns per request (median over a run's slices); vs nolog in the same run")
rel = {}
for r in runs:
    for m in modes:
        x = 100 * (med(r, m) / med(r, "nolog") - 1)
        rel.setdefault(m, []).append(x)
        print("%-4s %-6s %6d slices %7.0f ns %+7.2f%%" % (r, m, len(per[(r, m)]), med(r, m), x))
print("median over %d runs of the cost against nolog:" % len(runs))
for m in modes:
    if m != "nolog":
        print("  %-6s %+.2f%% (runs: %s), %+.0f ns/request" % (
            m, statistics.median(rel[m]), " ".join("%+.1f" % x for x in rel[m]),
            statistics.median(med(r, m) - med(r, "nolog") for r in runs)))
PY
echo "nginx-log-cost: results in $OUT"
