#!/usr/bin/env bash
# HTTP/2 over TLS: hlsedge against Debian's nginx with http2 on, each with
# ONE worker pinned to SERVER_CPU, h2load pinned to CLIENT_CPU, on the same
# library and certificate (ECDSA P-256, same suites; see lib.sh).
#
#   bash tests/bench/h2-vs-nginx.sh
#   RUNS=5 DURATION=10 CLIENTS=100 STREAMS=10 bash tests/bench/h2-vs-nginx.sh
#
# Phases: "playlists" (every media playlist of the library, in turn) and
# "segments" (every .ts). Per phase the servers alternate RUNS times
# (hlsedge, nginx, hlsedge, ...); each run is h2load -D DURATION after a
# warm-up, and the server's CPU-seconds (utime+stime of the process and
# its children, /proc/<pid>/stat) are read around it. Printed: per run
# requests and bytes per server CPU-second, then the median of the RUNS
# and the ratio hlsedge/nginx. Needs h2load (nghttp2-client) and nginx.
#
# Environment: RUNS=5 DURATION=10 (s) WARMUP=2 (s) CLIENTS=100 STREAMS=10
# PORTS="18080 18081" SERVER_CPU=0 CLIENT_CPU=1 LIBRARY=demo/library
# HLSEDGE=build/hlsedge OUT=var/bench/h2-vs-nginx-<time>
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
cd "$REPO"
BENCH_NAME=h2-vs-nginx
# shellcheck source=tests/bench/lib.sh
. "$BENCH_DIR/lib.sh"

RUNS=${RUNS:-5}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-100}
STREAMS=${STREAMS:-10}
PORTS=${PORTS:-"18080 18081"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LIBRARY=${LIBRARY:-demo/library}
HLSEDGE=${HLSEDGE:-build/hlsedge}
OUT=${OUT:-var/bench/h2-vs-nginx-$(date +%Y%m%d-%H%M%S)}
TLS=1
SCHEME=https
MAX_CONNS=20000
CC_M3U8="no-cache"
CC_TS="public, max-age=31536000, immutable"
NGINX_LISTEN_EXTRA=" http2"
read -r HLSEDGE_PORT NGINX_PORT <<<"$PORTS"
for t in h2load nginx taskset curl openssl; do
    command -v "$t" >/dev/null || bench_die "$t not found (run scripts/setup.sh)"
done
CLK_TCK=$(getconf CLK_TCK)
if [ ! -f "$LIBRARY/master.m3u8" ]; then
    bench_log "library $LIBRARY missing; making it"
    bash scripts/make-demo.sh "$LIBRARY"
fi
[ -x "$HLSEDGE" ] || bash scripts/build.sh
ROOT=$(cd "$LIBRARY" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/hlsedge-h2bench.XXXXXX)
SERVER_PID=""
trap '[ -n "$SERVER_PID" ] && stop_pid "$SERVER_PID" TERM; rm -rf "$TMP"' EXIT

(cd "$ROOT" && find . -name '*.m3u8' ! -name master.m3u8 | sed 's|^\.||' | sort) >"$TMP/playlists"
(cd "$ROOT" && find . -name '*.ts' | sed 's|^\.||' | sort) >"$TMP/segments"
[ -s "$TMP/playlists" ] && [ -s "$TMP/segments" ] || bench_die "no playlists or segments in $ROOT"

# one_run SERVER PHASE: prints "requests bytes cpu_s"
one_run() {
    local server=$1 phase=$2 pids t0 t1 out req bytes
    if [ "$server" = hlsedge ]; then start_hlsedge; else start_nginx; fi
    sed "s|^|https://127.0.0.1:$PORT|" "$TMP/$phase" >"$TMP/urls"
    curl -sk --http2 -o /dev/null -w '%{http_version}' "https://127.0.0.1:$PORT/master.m3u8" |
        grep -qx 2 || bench_die "$server does not speak h2"
    taskset -c "$CLIENT_CPU" h2load -c "$CLIENTS" -m "$STREAMS" -D "$WARMUP" -i "$TMP/urls" >/dev/null 2>&1 || true
    read -r -a pids <<<"$(server_pids "$SERVER_PID" | tr '\n' ' ')"
    t0=$(cpu_ticks "${pids[@]}")
    out=$(taskset -c "$CLIENT_CPU" h2load -c "$CLIENTS" -m "$STREAMS" -D "$DURATION" -i "$TMP/urls" 2>&1 || true)
    t1=$(cpu_ticks "${pids[@]}")
    stop_server "$server" "-$phase"
    echo "$out" >"$OUT/h2load-$server-$phase-$(date +%s%N).txt"
    req=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
    bytes=$(sed -n 's/^traffic: .*(\([0-9]*\)) total.*/\1/p' <<<"$out")
    grep -q " 0 failed, 0 errored" <<<"$out" || bench_log "$server $phase: h2load saw errors"
    echo "${req:-0} ${bytes:-0} $(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.3f", t / hz }')"
}

median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

{
    echo "h2load -c $CLIENTS -m $STREAMS -D ${DURATION}s over TLS (ALPN h2), $RUNS alternating runs"
    echo "server CPU $SERVER_CPU, client CPU $CLIENT_CPU; $(nginx -v 2>&1); hlsedge $(git rev-parse --short HEAD)"
    for phase in playlists segments; do
        : >"$TMP/hlsedge.$phase"
        : >"$TMP/nginx.$phase"
        for ((i = 1; i <= RUNS; i++)); do
            for server in hlsedge nginx; do
                read -r req bytes cpu <<<"$(one_run "$server" "$phase")"
                awk -v s="$server" -v p="$phase" -v i="$i" -v r="$req" -v b="$bytes" -v c="$cpu" 'BEGIN {
                    printf "%-9s %-8s run %d: %9d req %8.1f MB  cpu %6.2f s  %9.0f req/cpu-s  %7.1f MB/cpu-s\n",
                        p, s, i, r, b / 1e6, c, (c > 0 ? r / c : 0), (c > 0 ? b / 1e6 / c : 0) }'
                awk -v r="$req" -v b="$bytes" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.1f %.3f\n", r / c, b / 1e6 / c }' \
                    >>"$TMP/$server.$phase"
            done
        done
        hr=$(cut -d' ' -f1 "$TMP/hlsedge.$phase" | median); nr=$(cut -d' ' -f1 "$TMP/nginx.$phase" | median)
        hb=$(cut -d' ' -f2 "$TMP/hlsedge.$phase" | median); nb=$(cut -d' ' -f2 "$TMP/nginx.$phase" | median)
        awk -v p="$phase" -v hr="$hr" -v nr="$nr" -v hb="$hb" -v nb="$nb" 'BEGIN {
            printf "%s median: hlsedge %.0f req/cpu-s %.1f MB/cpu-s, nginx %.0f req/cpu-s %.1f MB/cpu-s, ratio %.2fx req %.2fx bytes\n",
                p, hr, hb, nr, nb, (nr > 0 ? hr / nr : 0), (nb > 0 ? hb / nb : 0) }'
    done
} | tee "$OUT/summary.txt"
