#!/usr/bin/env bash
# hlsedge's edge cache against nginx (docs/performance.md, "Cache: RAM hits
# and cold misses vs nginx"):
#   1. RAM hits: hlsedge answering warm RAM-tier objects (pulled once from
#      tests/integration/origin.py) against nginx serving the same files
#      from the page cache: bytes per server CPU-second, p99 (wrk).
#   2. cold miss burst: CLIENTS clients at once on a cold SEG_MB segment
#      that the origin sends at RATE bytes/s; hlsedge (coalesced fill) vs
#      nginx proxy_cache + proxy_cache_lock: origin requests, time to last
#      byte of the waiters (median, max).
#   hlsedge also serves the files themselves from root (sendfile, no cache:
#   the same mechanism as nginx), to tell the server from the path apart.
#   RAM hits run twice for hlsedge: as configured (send_zc for spans of
#   256 KiB and more) and with plain sends only (cache.zero_copy_min: 1t,
#   above any span); /metrics says how many zero-copy sends the kernel
#   copied.
# Servers on SERVER_CPU, clients on CLIENT_CPU, all under chrt -r 10 when
# allowed (round-robin: under chrt -f wrk's threads can starve each other).
# RUNS runs each; the medians are printed.
#   tests/bench/cache-vs-nginx.sh [build/hlsedge]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=$REPO/tests/bench
HLSEDGE=${1:-${HLSEDGE:-$REPO/build/hlsedge}}
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
RUNS=${RUNS:-3} DURATION=${DURATION:-10} CONNS=${CONNS:-50}
NSEG=${NSEG:-20} SEG_KB=${SEG_KB:-2048}
CLIENTS=${CLIENTS:-200} SEG_MB=${SEG_MB:-4} RATE=${RATE:-8388608}
HPORT=${HPORT:-18580} NPORT=${NPORT:-18581} OPORT=${OPORT:-18582} APORT=${APORT:-18583}
BENCH_NAME=cache-vs-nginx
# shellcheck source=tests/bench/lib.sh
. "$BENCH_DIR/lib.sh"

TMP=$(mktemp -d /tmp/he-cache-bench.XXXXXX)
ROOT=$TMP/origin
mkdir -p "$ROOT/vod" "$TMP/empty" "$TMP/nginx-cache" "$TMP/proxy"
ORIGIN_PID="" SRV=""
cleanup() {
    stop_pid "$SRV"
    stop_pid "$ORIGIN_PID"
    rm -rf "$TMP"
}
trap cleanup EXIT

RT=""
chrt -r 10 true 2>/dev/null && RT="chrt -r 10"

for ((i = 0; i < NSEG; i++)); do
    head -c $((SEG_KB * 1024)) /dev/urandom >"$ROOT/vod/seg_$i.ts"
    echo "/vod/seg_$i.ts" >>"$TMP/paths"
done
head -c $((SEG_MB << 20)) /dev/urandom >"$ROOT/vod/cold.ts"

$RT taskset -c "$CLIENT_CPU" python3 "$REPO/tests/integration/origin.py" --port "$OPORT" \
    --root "$ROOT" >"$TMP/origin.log" 2>&1 &
ORIGIN_PID=$!
for ((i = 0; i < 50; i++)); do curl -sf "http://127.0.0.1:$OPORT/_stats" >/dev/null && break; sleep 0.1; done

start_he() { # ["KEY: VALUE" ...] for hlsedge's cache:; HE_ROOT: serve that root, sendfile
    start_hlsedge_cache "${HE_ROOT:-$TMP/empty}" "$@"
}

# mode: static (files from the page cache) or proxy (proxy_cache + lock)
start_nginx_mode() {
    local user="" loc
    [ "$(id -u)" = 0 ] && user="user root;"
    if [ "$1" = static ]; then
        loc="root $ROOT;"
    else
        rm -rf "$TMP/nginx-cache"/*
        loc="proxy_pass http://127.0.0.1:$OPORT; proxy_cache c; proxy_cache_lock on;
             proxy_cache_lock_timeout 120s; proxy_cache_lock_age 120s; proxy_cache_valid 200 1h;
             proxy_read_timeout 120s; proxy_http_version 1.1; proxy_set_header Connection \"\";"
    fi
    cat >"$TMP/nginx.conf" <<EOF
$user
worker_processes 1;
worker_cpu_affinity $(cpu_mask "$SERVER_CPU");
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log warn;
events { worker_connections 16384; use epoll; multi_accept on; }
http {
    default_type application/octet-stream;
    # tuned as in nginx.conf.in (vs-nginx.sh), 256k chunks included
    access_log off; sendfile on; sendfile_max_chunk 256k; tcp_nopush on; tcp_nodelay on;
    keepalive_requests 1000000;
    open_file_cache max=10000 inactive=60s; open_file_cache_valid 60s;
    open_file_cache_min_uses 1; open_file_cache_errors on;
    proxy_cache_path $TMP/nginx-cache levels=1:2 keys_zone=c:10m max_size=2g;
    proxy_temp_path $TMP/proxy;
    server { listen 127.0.0.1:$NPORT backlog=4096; location / { $loc } }
}
EOF
    $RT taskset -c "$SERVER_CPU" nginx -p "$TMP" -c "$TMP/nginx.conf" -g 'daemon off;' \
        >"$TMP/nginx.out" 2>&1 &
    SRV=$!
    for ((i = 0; i < 50; i++)); do curl -s -o /dev/null "http://127.0.0.1:$NPORT/" && return; sleep 0.1; done
    bench_die "nginx did not start: $(tail -3 "$TMP/nginx-error.log")"
}

# wrk on the warm objects: prints "GB_per_cpu_s p99_ms rps"
hit_run() {
    local port=$1 t0 t1 out req bytes p99
    for p in $(cat "$TMP/paths"); do curl -s -o /dev/null "http://127.0.0.1:$port$p"; done
    for p in $(cat "$TMP/paths"); do curl -s -o /dev/null "http://127.0.0.1:$port$p"; done
    t0=$(cpu_ticks $(server_pids "$SRV"))
    out=$($RT taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" \
        -s "$BENCH_DIR/random-paths.lua" "http://127.0.0.1:$port" -- "$TMP/paths" | grep WRK_RESULT)
    t1=$(cpu_ticks $(server_pids "$SRV"))
    req=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$out")
    bytes=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' <<<"$out")
    p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$out")
    awk -v b="$bytes" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v p="$p99" -v r="$req" \
        -v d="$DURATION" 'BEGIN { printf "%.2f %.2f %.0f\n", b / 1e9 / (t / hz), p / 1000, r / d }'
}

# CLIENTS at once on a cold path: prints "origin_requests ttlb_median_ms ttlb_max_ms bad"
burst_run() {
    local port=$1 path=$2
    curl -s "http://127.0.0.1:$OPORT/_control?reset_stats=1" >/dev/null
    curl -s "http://127.0.0.1:$OPORT/_control?path=$path&rate=$RATE" >/dev/null
    $RT taskset -c "$CLIENT_CPU" python3 - "$port" "$path" "$CLIENTS" "$ROOT/vod/cold.ts" <<'EOF'
import http.client, statistics, sys, threading, time
port, path, n, ref = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), open(sys.argv[4], "rb").read()
bar = threading.Barrier(n); out = [None] * n
def one(i):
    bar.wait()
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        c.request("GET", path); r = c.getresponse(); b = r.read()
        out[i] = (time.monotonic() - t0, r.status == 200 and b == ref)
    except Exception:
        out[i] = (time.monotonic() - t0, False)
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
d = sorted(x[0] for x in out)
print("%.0f %.0f %d" % (statistics.median(d) * 1000, d[-1] * 1000, sum(1 for x in out if not x[1])))
EOF
}

origin_count() {
    curl -s "http://127.0.0.1:$OPORT/_stats" |
        python3 -c "import json,sys; print(json.load(sys.stdin)['requests'].get(sys.argv[1], 0))" "$1"
}


median() { sort -g | awk '{a[NR] = $1} END { print a[int((NR + 1) / 2)] }'; }

: >"$TMP/res"
for ((r = 1; r <= RUNS; r++)); do
    HE_ROOT=$ROOT start_he # the same files as nginx, by sendfile (no cache)
    echo "he_file $(hit_run "$HPORT")" >>"$TMP/res"
    stop_pid "$SRV"
    start_he "zero_copy_min: 1t"
    echo "he_hit_send $(hit_run "$HPORT")" >>"$TMP/res"
    stop_pid "$SRV"
    start_he
    echo "he_hit $(hit_run "$HPORT")" >>"$TMP/res"
    read -r zs zc <<<"$(he_zc_counts "$APORT")"
    echo "zero-copy sends (run $r): sent $zs copied $zc" >&2
    b=$(burst_run "$HPORT" /vod/cold.ts)
    echo "he_burst $(origin_count /vod/cold.ts) $b" >>"$TMP/res"
    stop_pid "$SRV"
    start_nginx_mode static
    echo "ng_hit $(hit_run "$NPORT")" >>"$TMP/res"
    stop_pid "$SRV"
    start_nginx_mode proxy
    b=$(burst_run "$NPORT" /vod/cold.ts)
    echo "ng_burst $(origin_count /vod/cold.ts) $b" >>"$TMP/res"
    stop_pid "$SRV"
    SRV=""
done
cat "$TMP/res" >&2
for k in he_hit he_hit_send he_file ng_hit; do
    printf '%-8s GB/CPU-s %s  p99 ms %s  req/s %s\n' "$k" \
        "$(awk -v k=$k '$1 == k { print $2 }' "$TMP/res" | median)" \
        "$(awk -v k=$k '$1 == k { print $3 }' "$TMP/res" | median)" \
        "$(awk -v k=$k '$1 == k { print $4 }' "$TMP/res" | median)"
done
for k in he_burst ng_burst; do
    printf '%-8s origin requests %s  TTLB median ms %s  max ms %s  bad bodies %s\n' "$k" \
        "$(awk -v k=$k '$1 == k { print $2 }' "$TMP/res" | median)" \
        "$(awk -v k=$k '$1 == k { print $3 }' "$TMP/res" | median)" \
        "$(awk -v k=$k '$1 == k { print $4 }' "$TMP/res" | median)" \
        "$(awk -v k=$k '$1 == k { print $5 }' "$TMP/res" | median)"
done
