#!/usr/bin/env bash
# send vs send_zc for RAM-tier hits (docs/performance.md, "send vs
# send_zc"): hlsedge serves warm RAM objects of each SIZES size to wrk, in
# three modes:
#   send  plain sends only (cache.zero_copy_min: 1t, above any span)
#   zc    SEND_ZC for every span, kept on even when the kernel reports it
#         copied (cache.zero_copy_min: 0, cache.zero_copy_adapt: false)
#   auto  as shipped: SEND_ZC for spans of 256 KiB and more, dropped per
#         connection at the first notification that says "copied"
# For each: server bytes per CPU-second, p99, and how many zero-copy
# sends the kernel reported as copied (/metrics). One worker on
# SERVER_CPU, wrk on CLIENT_CPU, both under chrt -r 10 where allowed.
#   tests/bench/zc-crossover.sh [build/hlsedge]
# Environment: RUNS=3 DURATION=5 CONNS=50 NOBJ=16 SIZES="16 64 256 1024 4096" (KiB)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=$REPO/tests/bench
HLSEDGE=${1:-${HLSEDGE:-$REPO/build/hlsedge}}
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
RUNS=${RUNS:-3} DURATION=${DURATION:-5} CONNS=${CONNS:-50} NOBJ=${NOBJ:-16}
SIZES=${SIZES:-16 64 256 1024 4096} MODES=${MODES:-send zc auto}
HPORT=${HPORT:-18680} OPORT=${OPORT:-18682} APORT=${APORT:-18683}
BENCH_NAME=zc-crossover
# shellcheck source=tests/bench/lib.sh
. "$BENCH_DIR/lib.sh"

TMP=$(mktemp -d /tmp/he-zc-bench.XXXXXX)
ROOT=$TMP/origin
mkdir -p "$TMP/empty"
ORIGIN_PID="" SRV=""
cleanup() {
    stop_pid "$SRV"
    stop_pid "$ORIGIN_PID"
    rm -rf "$TMP"
}
trap cleanup EXIT
RT=""
chrt -r 10 true 2>/dev/null && RT="chrt -r 10"

for kb in $SIZES; do
    mkdir -p "$ROOT/s$kb"
    for ((i = 0; i < NOBJ; i++)); do
        head -c $((kb * 1024)) /dev/urandom >"$ROOT/s$kb/o$i.ts"
        echo "/s$kb/o$i.ts" >>"$TMP/paths-$kb"
    done
done
taskset -c "$CLIENT_CPU" python3 "$REPO/tests/integration/origin.py" --port "$OPORT" \
    --root "$ROOT" >"$TMP/origin.log" 2>&1 &
ORIGIN_PID=$!
for ((i = 0; i < 50; i++)); do curl -sf "http://127.0.0.1:$OPORT/_stats" >/dev/null && break; sleep 0.1; done

start_he() { # MODE
    local keys=()
    case $1 in
        send) keys=("zero_copy_min: 1t") ;;
        zc) keys=("zero_copy_min: 0" "zero_copy_adapt: false") ;;
        auto) ;;
        *) bench_die "unknown mode $1" ;;
    esac
    start_hlsedge_cache "$TMP/empty" ${keys[@]+"${keys[@]}"}
    for kb in $SIZES; do # fill, then hit once: all warm in RAM
        for p in $(cat "$TMP/paths-$kb") $(cat "$TMP/paths-$kb"); do
            curl -sf -o /dev/null "http://127.0.0.1:$HPORT$p" || bench_die "GET $p failed"
        done
    done
}

# one wrk slice on one size: "GB_per_cpu_s p99_ms zc_sent zc_copied"
hit_run() {
    local kb=$1 t0 t1 out bytes p99 z0 z1
    z0=$(he_zc_counts "$APORT")
    t0=$(cpu_ticks "$SRV")
    out=$($RT taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" \
        -s "$BENCH_DIR/random-paths.lua" "http://127.0.0.1:$HPORT" -- "$TMP/paths-$kb" |
        grep WRK_RESULT) || bench_die "wrk failed"
    t1=$(cpu_ticks "$SRV")
    z1=$(he_zc_counts "$APORT")
    bytes=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' <<<"$out")
    p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$out")
    awk -v b="$bytes" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v p="$p99" \
        -v z0="$z0" -v z1="$z1" 'BEGIN { split(z0, a, " "); split(z1, c, " ");
        printf "%.3f %.2f %d %d\n", b / 1e9 / (t / hz), p / 1000, c[1] - a[1], c[2] - a[2] }'
}

: >"$TMP/res"
for ((r = 1; r <= RUNS; r++)); do
    for m in $MODES; do
        start_he "$m"
        for kb in $SIZES; do
            echo "$m $kb $(hit_run "$kb")" | tee -a "$TMP/res" >&2
        done
        stop_pid "$SRV"
        SRV=""
    done
done
python3 - "$TMP/res" "$MODES" "$SIZES" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
modes, sizes = sys.argv[2].split(), sys.argv[3].split()
def med(m, kb, k):
    v = [float(r[k]) for r in rows if r[0] == m and r[1] == kb]
    return statistics.median(v) if v else float("nan")
print("server GB per CPU-second (median of runs); p99 ms; zero-copy sends copied/sent")
print("%8s" % "KiB" + "".join("%22s" % m for m in modes) + ("%12s" % "zc/send" if "zc" in modes and "send" in modes else ""))
for kb in sizes:
    line = "%8s" % kb
    for m in modes:
        line += "%9.3f %5.1fms %3.0f%%" % (med(m, kb, 2), med(m, kb, 3),
            100 * med(m, kb, 5) / med(m, kb, 4) if med(m, kb, 4) else 0)
    if "zc" in modes and "send" in modes:
        line += "%12.3f" % (med("zc", kb, 2) / med("send", kb, 2))
    print(line)
EOF
