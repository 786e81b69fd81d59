# shellcheck shell=bash disable=SC2034
# Shared shell functions for the benchmarks in tests/bench/ (sourced, not
# run). Start-up of hlsedge and nginx with one worker pinned to one CPU,
# CPU accounting from /proc, process clean-up. Written for
# tests/bench/scenarios.sh and sourced by every benchmark script here;
# tests/bench/vs-nginx.sh redefines the start/check functions it needs
# differently (TLS checked against its own CA file).
#
# The caller sets, before calling the start/check functions:
#   REPO BENCH_DIR        repository root, tests/bench
#   ROOT                  absolute library directory
#   OUT TMP               output directory, scratch directory
#   SERVER_CPU            CPU the server (one worker) is pinned to
#   HLSEDGE               hlsedge binary
#   HLSEDGE_PORT NGINX_PORT
#   MAX_CONNS             hlsedge limits.max_connections
#   CC_M3U8 CC_TS         Cache-Control values (same for both servers)
#   TLS=0|1               serve HTTPS on the port (a self-signed P-256
#                         certificate made with openssl); hlsedge then keeps
#                         a plain listener on HLSEDGE_PORT+1000
#   BENCH_NAME            prefix of messages
# and gets SERVER_PID, PORT (the port to load) and SCHEME (http or https).

bench_die() { echo "${BENCH_NAME:-bench}: $*" >&2; exit 1; }
bench_log() { echo "${BENCH_NAME:-bench}: $*" >&2; }

SERVER_PID="" PORT="" SCHEME="http"

stop_pid() { # stop_pid PID [SIGNAL]: signal, then wait up to 5 s, then KILL
    local pid=$1 sig=${2:-TERM} i
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -"$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

he_zc_counts() { # he_zc_counts ADMIN_PORT: "SENT COPIED", hlsedge's zero-copy sends so far
    curl -s "http://127.0.0.1:$1/metrics" | awk '
        /^hlsedge_cache_zc_sends_total/ { s += $NF }
        /^hlsedge_cache_zc_copied_total/ { c += $NF }
        END { printf "%d %d", s, c }'
}

# start_hlsedge_cache ROOT ["KEY: VALUE" ...]: hlsedge as an edge cache for
# the cache benchmarks: one worker on SERVER_CPU, viewers on HPORT, admin
# on APORT, misses from the origin on OPORT, a 512 MiB RAM tier that admits
# everything and does not prefetch; each further argument is one more line
# of the cache: section ("zero_copy_min: 1t"). RT is a scheduler prefix
# (chrt -r 10) or empty. Sets SRV; its log is $TMP/he.log.
start_hlsedge_cache() {
    local root=$1 i line
    shift
    cat >"$TMP/he.yaml" <<EOF
listen: ["127.0.0.1:$HPORT"]
root: $root
workers: 1
cpus: [$SERVER_CPU]
cache:
  ram_size: 512m
  ram_object_max: 64m
  admission: false
  prefetch: 0
EOF
    for line in "$@"; do echo "  $line"; done >>"$TMP/he.yaml"
    cat >>"$TMP/he.yaml" <<EOF
admin:
  listen: "127.0.0.1:$APORT"
origin:
  urls: ["http://127.0.0.1:$OPORT"]
  read_timeout: 30s
  total_timeout: 120s
EOF
    ${RT:-} taskset -c "$SERVER_CPU" "$HLSEDGE" -c "$TMP/he.yaml" >"$TMP/he.log" 2>&1 &
    SRV=$!
    for ((i = 0; i < 50; i++)); do curl -s -o /dev/null "http://127.0.0.1:$HPORT/" && return 0; sleep 0.1; done
    bench_die "hlsedge did not start: $(tail -3 "$TMP/he.log")"
}

cpu_mask() { printf '%x' $((1 << $1)); }

port_free() { [ -z "$(ss -Htln "sport = :$1" 2>/dev/null)" ]; }

# Pids whose CPU time counts for the server: the process and its children.
server_pids() {
    local p=$1
    echo "$p"
    pgrep -P "$p" 2>/dev/null || true
}

# Sum of utime+stime (clock ticks) over the given pids; for the first pid
# also cutime+cstime, so a child that exited during the run still counts.
cpu_ticks() {
    local first=1 total=0 pid stat f
    for pid in "$@"; do
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
        # Fields from 3 (state) on; comm (field 2) may hold spaces and ')'.
        read -r -a f <<<"${stat##*) }"
        # f[11]=utime(14) f[12]=stime(15) f[13]=cutime(16) f[14]=cstime(17)
        total=$((total + f[11] + f[12]))
        if [ $first = 1 ]; then total=$((total + f[13] + f[14])); fi
        first=0
    done
    echo "$total"
}

# Busy ticks of one CPU from /proc/stat: everything except idle and iowait.
cpu_busy_ticks() {
    awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

# irq + softirq ticks of one CPU from /proc/stat.
cpu_softirq_ticks() {
    awk -v c="cpu$1" '$1 == c { print $7 + $8; exit }' /proc/stat
}

curl_k() { # curl with -k in TLS mode
    if [ "${TLS:-0}" = 1 ]; then curl -k "$@"; else curl "$@"; fi
}

wait_ready() { # wait_ready PORT PID
    local i code
    for ((i = 0; i < 100; i++)); do
        kill -0 "$2" 2>/dev/null || return 1
        code=$(curl_k -s -o /dev/null -w '%{http_code}' --max-time 1 \
            "$SCHEME://127.0.0.1:$1/master.m3u8" || true)
        [ "$code" = 200 ] && return 0
        sleep 0.1
    done
    return 1
}

# check_responses SERVER PORT SEGMENTS_FILE PLAYLISTS_FILE: fetches a few
# files and compares them byte for byte with the library.
check_responses() {
    local p got
    for p in /master.m3u8 "$(sed -n 1p "$4")" "$(sed -n 1p "$3")" "$(tail -n 1 "$3")"; do
        curl_k -sf --max-time 10 -o "$TMP/check" "$SCHEME://127.0.0.1:$2$p" ||
            bench_die "$1: GET $p failed"
        cmp -s "$TMP/check" "$ROOT$p" || bench_die "$1: GET $p: body differs from the file"
    done
    got=$(curl_k -s -o /dev/null -w '%{http_code}' "$SCHEME://127.0.0.1:$2/no/such/file.ts")
    [ "$got" = 404 ] || bench_die "$1: GET of a missing file answered $got, not 404"
}

# A self-signed ECDSA P-256 certificate for 127.0.0.1 in $TMP (once):
# $TMP/tls.crt, $TMP/tls.key and $TMP/tls.pem (both, hlsedge's format).
make_bench_cert() {
    [ -f "$TMP/tls.pem" ] && return 0
    command -v openssl >/dev/null || bench_die "openssl not found (TLS=1)"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
        -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$TMP/tls.key" -out "$TMP/tls.crt" >/dev/null 2>&1 ||
        bench_die "openssl could not make a test certificate"
    cat "$TMP/tls.crt" "$TMP/tls.key" >"$TMP/tls.pem"
}

# nginx's TLS policy for TLS=1: the same as server/tls.c (and vs-nginx.sh).
nginx_tls_conf() {
    cat <<EOF
ssl_certificate $TMP/tls.crt;
ssl_certificate_key $TMP/tls.key;
ssl_protocols TLSv1.2 TLSv1.3;
ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305;
ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
ssl_prefer_server_ciphers on;
ssl_ecdh_curve X25519:prime256v1:secp384r1;
ssl_session_cache shared:SSL:10m;
ssl_session_tickets on;
EOF
}

# nginx.conf from tests/bench/nginx.conf.in. The template marks TLS with
# "@SSL@" on the listen line and an include of @TMP@/nginx-tls.conf; an
# older template without them gets its listen line rewritten instead.
start_nginx() {
    local conf="$TMP/nginx.conf" user_line="" d ssl=""
    port_free "$NGINX_PORT" || bench_die "port $NGINX_PORT is in use"
    for d in client_body proxy fastcgi uwsgi scgi; do mkdir -p "$TMP/$d"; done
    # As root, workers run as root too, so they can read any library path.
    [ "$(id -u)" = 0 ] && user_line="user root;"
    SCHEME=http
    : >"$TMP/nginx-tls.conf"
    if [ "${TLS:-0}" = 1 ]; then
        make_bench_cert
        SCHEME=https
        ssl=" ssl${NGINX_LISTEN_EXTRA:-}" # h2-vs-nginx.sh: " http2" (nginx 1.22's spelling)
        nginx_tls_conf >"$TMP/nginx-tls.conf"
    fi
    sed -e "s|@USER_LINE@|$user_line|" -e "s|@CPU_MASK@|$(cpu_mask "$SERVER_CPU")|" \
        -e "s|@TMP@|$TMP|g" -e "s|@ROOT@|$ROOT|g" \
        -e "s|@CC_M3U8@|$CC_M3U8|g" -e "s|@CC_TS@|$CC_TS|g" \
        -e "s|@SSL@|$ssl|g" -e "s|@PORT@|$NGINX_PORT|g" \
        "$BENCH_DIR/nginx.conf.in" >"$conf"
    if [ "${TLS:-0}" = 1 ] && ! grep -q "include $TMP/nginx-tls.conf;" "$conf"; then
        sed -i "s|^\( *\)listen 127\.0\.0\.1:$NGINX_PORT backlog=4096;|\1listen 127.0.0.1:$NGINX_PORT ssl backlog=4096; include $TMP/nginx-tls.conf;|" "$conf"
    fi
    grep -q "listen 127.0.0.1:$NGINX_PORT" "$conf" || bench_die "nginx.conf.in: no listen line to fill in"
    if grep -v '^ *#' "$conf" | grep -q '@[A-Z_]*@'; then
        bench_die "nginx.conf.in has placeholders this script does not fill: $(grep -v '^ *#' "$conf" | grep -o '@[A-Z_]*@' | sort -u | tr '\n' ' ')"
    fi
    cp "$conf" "$OUT/nginx.conf"
    nginx -t -q -e "$TMP/nginx-error.log" -p "$TMP" -c "$conf" ||
        bench_die "nginx -t failed: $(cat "$TMP/nginx-error.log" 2>/dev/null)"
    taskset -c "$SERVER_CPU" nginx -e "$TMP/nginx-error.log" -p "$TMP" -c "$conf" \
        -g 'daemon off;' >"$TMP/nginx.stdout" 2>&1 &
    SERVER_PID=$!
    wait_ready "$NGINX_PORT" "$SERVER_PID" ||
        bench_die "nginx did not come up: $(tail -n 5 "$TMP/nginx-error.log" 2>/dev/null)"
    PORT=$NGINX_PORT
}

start_hlsedge() {
    local conf="$TMP/hlsedge.yaml" plain=$HLSEDGE_PORT
    port_free "$HLSEDGE_PORT" || bench_die "port $HLSEDGE_PORT is in use"
    SCHEME=http
    if [ "${TLS:-0}" = 1 ]; then
        make_bench_cert
        SCHEME=https
        plain=$((HLSEDGE_PORT + 1000))
        port_free "$plain" || bench_die "port $plain (hlsedge's plain listener) is in use"
    fi
    sed -e "s|@CPU@|$SERVER_CPU|g" -e "s|@PORT@|$plain|g" -e "s|@ROOT@|$ROOT|g" \
        -e "s|@MAX_CONNS@|$MAX_CONNS|g" \
        -e "s|@CC_M3U8@|$CC_M3U8|g" -e "s|@CC_TS@|$CC_TS|g" \
        "$BENCH_DIR/hlsedge.yaml.in" >"$conf"
    if [ "${TLS:-0}" = 1 ]; then
        printf 'tls:\n  listen: ["127.0.0.1:%s"]\n  certificates: ["%s"]\n' \
            "$HLSEDGE_PORT" "$TMP/tls.pem" >>"$conf"
    fi
    cp "$conf" "$OUT/hlsedge.yaml"
    "$HLSEDGE" -t -c "$conf" >"$TMP/hlsedge-t.log" 2>&1 ||
        bench_die "hlsedge -t failed: $(cat "$TMP/hlsedge-t.log")"
    taskset -c "$SERVER_CPU" "$HLSEDGE" -c "$conf" >"$TMP/hlsedge.log" 2>&1 &
    SERVER_PID=$!
    wait_ready "$HLSEDGE_PORT" "$SERVER_PID" ||
        bench_die "hlsedge did not come up: $(tail -n 5 "$TMP/hlsedge.log" 2>/dev/null)"
    PORT=$HLSEDGE_PORT
}

stop_server() { # stop_server NAME [SUFFIX]: logs are kept in OUT
    stop_pid "$SERVER_PID" TERM
    SERVER_PID=""
    case "$1" in
        nginx) cp "$TMP/nginx-error.log" "$OUT/nginx-error${2:-}.log" 2>/dev/null || true ;;
        hlsedge) cp "$TMP/hlsedge.log" "$OUT/hlsedge${2:-}.log" 2>/dev/null || true ;;
    esac
}

# The scheduling policy this shell runs under, e.g. "SCHED_FIFO 10".
sched_policy() {
    chrt -p $$ 2>/dev/null | awk -F': ' '/policy/ { p = $2 } /priority/ { q = $2 } END { print p, q }'
}
