#!/usr/bin/env bash
# Side-by-side benchmark: hlsedge vs Debian's nginx serving the same HLS
# library, each with ONE worker pinned to one CPU, wrk pinned to another.
#
#   sudo bash tests/bench/vs-nginx.sh
#   SERVERS=nginx DURATION=5s bash tests/bench/vs-nginx.sh
#   PERF=1 bash tests/bench/vs-nginx.sh          + perf profiles per phase
#   TLS=1 bash tests/bench/vs-nginx.sh           over HTTPS (see TLS below)
#
# Phases: "segments" (random .ts of the library) then "playlists" (random
# .m3u8). Per server and phase it prints requests/s, GB/s, p99 latency and the
# server's CPU-seconds (utime+stime from /proc/<pid>/stat, all threads; nginx:
# master + worker), with the derived costs (CPU-s per GB, per 1000 requests)
# and efficiencies (bytes and requests per CPU-second), then hlsedge/nginx
# ratios. It also shows the busy time of the server CPU from /proc/stat,
# which additionally catches softirq/irq work that the kernel does not charge
# to the process.
#
# Environment:
#   SERVERS="hlsedge nginx"  which servers, in order
#   DURATION=10s             wrk -d per measured phase
#   WARMUP=2s                unmeasured wrk run before each phase ("0" = none)
#   CONNS=50 THREADS=1       wrk -c / -t
#   PHASES="segments playlists"  which phases, in order
#   PORTS="18080 18081"      hlsedge port, nginx port (127.0.0.1)
#   SERVER_CPU=0 CLIENT_CPU=1
#   LIBRARY=demo/library     made with scripts/make-demo.sh when missing
#   HLSEDGE=build/hlsedge    built with scripts/build.sh when missing
#   OUT=var/bench/vs-nginx-<time>   output directory
#   PERF=1                   perf record -e cpu-clock -g on the server per phase;
#                            top-30 "perf report --no-children --sort dso,sym"
#                            in OUT/perf-<server>-<phase>.txt (CPU numbers
#                            then include the sampling overhead)
#   TLS=1                    HTTPS: one ECDSA P-256 certificate for both servers,
#                            TLS 1.2+1.3 with the same suites and server order
#                            (TLS 1.3 AES-128-GCM is what wrk gets), session
#                            tickets; nginx with sendfile on and ssl_buffer_size
#                            at its default (16k); wrk with https URLs. Without
#                            kTLS in the kernel both encrypt in userspace.
#   ACCESS_LOG=1             both servers write a combined access log to a file:
#                            nginx "access_log FILE combined buffer=512k
#                            flush=1s", hlsedge log.access with its control
#                            thread on the worker's CPU (the whole process is
#                            pinned there, so it is charged); the files are
#                            deleted when their server stops
# Loopback only; every wrk run is bounded by -d; servers are killed on exit.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_DIR="$REPO/tests/bench"
cd "$REPO"
BENCH_NAME=vs-nginx
# shellcheck source=tests/bench/lib.sh
. "$BENCH_DIR/lib.sh" # stop_pid, cpu_mask, port_free, server_pids, cpu_ticks, cpu_busy_ticks

SERVERS=${SERVERS:-"hlsedge nginx"}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNS=${CONNS:-50}
PHASES=${PHASES:-"segments playlists"}
THREADS=${THREADS:-1}
PORTS=${PORTS:-"18080 18081"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LIBRARY=${LIBRARY:-demo/library}
HLSEDGE=${HLSEDGE:-build/hlsedge}
PERF=${PERF:-0}
TLS=${TLS:-0}
ACCESS_LOG=${ACCESS_LOG:-0}
SCHEME=http
[ "$TLS" = 1 ] && SCHEME=https
OUT=${OUT:-var/bench/vs-nginx-$(date +%Y%m%d-%H%M%S)}
CC_M3U8="no-cache"
CC_TS="public, max-age=31536000, immutable"

die() { echo "vs-nginx: $*" >&2; exit 1; }
log() { echo "vs-nginx: $*" >&2; }

read -r HLSEDGE_PORT NGINX_PORT <<<"$PORTS"
[ -n "${NGINX_PORT:-}" ] || die "PORTS needs two ports: \"HLSEDGE_PORT NGINX_PORT\""
for s in $SERVERS; do
    case "$s" in hlsedge|nginx) ;; *) die "unknown server in SERVERS: $s" ;; esac
done
[ "$THREADS" -le "$CONNS" ] || die "THREADS must be <= CONNS"
ncpu=$(nproc --all)
[ "$SERVER_CPU" -lt "$ncpu" ] && [ "$CLIENT_CPU" -lt "$ncpu" ] ||
    die "SERVER_CPU/CLIENT_CPU must be < $ncpu"
[ "$SERVER_CPU" != "$CLIENT_CPU" ] || log "warning: server and client share CPU $SERVER_CPU"
for t in wrk taskset curl python3 $([ "$TLS" = 1 ] && echo openssl); do
    command -v "$t" >/dev/null || die "$t not found (run scripts/setup.sh)"
done
if [ "$PERF" = 1 ]; then command -v perf >/dev/null || die "perf not found (scripts/setup.sh --bench)"; fi

CLK_TCK=$(getconf CLK_TCK)

# ---------------------------------------------------------------- inputs
if [ ! -f "$LIBRARY/master.m3u8" ] || [ ! -f "$LIBRARY/.hlsedge-demo" ]; then
    log "library $LIBRARY missing or incomplete; making it"
    bash scripts/make-demo.sh "$LIBRARY"
fi
ROOT=$(cd "$LIBRARY" && pwd)
if [[ " $SERVERS " == *" hlsedge "* ]] && [ ! -x "$HLSEDGE" ]; then
    log "$HLSEDGE missing; building"
    bash scripts/build.sh
    [ -x "$HLSEDGE" ] || die "$HLSEDGE still missing after scripts/build.sh"
fi
if [[ " $SERVERS " == *" nginx "* ]]; then
    command -v nginx >/dev/null || die "nginx not found (run scripts/setup.sh)"
fi

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/hlsedge-bench.XXXXXX)

# TLS: one self-signed certificate for both servers; curl trusts it.
CURL_TLS=()
: >"$TMP/nginx-tls.conf"
if [ "$TLS" = 1 ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
        -keyout "$TMP/tls.key" -out "$TMP/tls.crt" 2>/dev/null || die "openssl req failed"
    cat "$TMP/tls.crt" "$TMP/tls.key" >"$TMP/tls.pem"
    CURL_TLS=(--cacert "$TMP/tls.crt")
    # The same policy as server/tls.c.
    cat >"$TMP/nginx-tls.conf" <<EOF
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
fi

(cd "$ROOT" && find . -name '*.ts' -type f | sed 's|^\.||' | sort) >"$OUT/paths-segments.txt"
(cd "$ROOT" && find . -name '*.m3u8' -type f | sed 's|^\.||' | sort) >"$OUT/paths-playlists.txt"
nseg=$(wc -l <"$OUT/paths-segments.txt")
npl=$(wc -l <"$OUT/paths-playlists.txt")
[ "$nseg" -gt 0 ] && [ "$npl" -gt 0 ] || die "no .ts or .m3u8 files under $ROOT"
lib_bytes=$(du -sb "$ROOT" | cut -f1)

# ---------------------------------------------------------------- cleanup
SERVER_PID="" PERF_PID="" WRK_PID=""
cleanup() {
    stop_pid "$WRK_PID" KILL
    stop_pid "$PERF_PID" INT
    # nginx: TERM to the master stops its worker too (fast shutdown).
    stop_pid "$SERVER_PID" TERM
    if [ -n "${KEEP_TMP:-}" ]; then log "temp dir kept: $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- helpers
# lib.sh's start/check functions are redefined below: this script checks
# TLS against its own CA file (CURL_TLS) and logs the negotiated suite.
wait_ready() { # wait_ready PORT PID
    local i code
    for ((i = 0; i < 100; i++)); do
        kill -0 "$2" 2>/dev/null || return 1
        code=$(curl -s ${CURL_TLS[@]+"${CURL_TLS[@]}"} -o /dev/null -w '%{http_code}' --max-time 1 \
            "$SCHEME://127.0.0.1:$1/master.m3u8" || true)
        [ "$code" = 200 ] && return 0
        sleep 0.1
    done
    return 1
}

# Fetches a few files and compares them byte for byte with the library.
check_responses() { # check_responses SERVER PORT
    local p got
    for p in /master.m3u8 "$(sed -n 1p "$OUT/paths-playlists.txt")" \
        "$(sed -n 1p "$OUT/paths-segments.txt")" "$(tail -n 1 "$OUT/paths-segments.txt")"; do
        curl -sf ${CURL_TLS[@]+"${CURL_TLS[@]}"} --max-time 10 -o "$TMP/check" "$SCHEME://127.0.0.1:$2$p" ||
            die "$1: GET $p failed"
        cmp -s "$TMP/check" "$ROOT$p" || die "$1: GET $p: body differs from the file"
    done
    got=$(curl -s ${CURL_TLS[@]+"${CURL_TLS[@]}"} -o /dev/null -w '%{http_code}' "$SCHEME://127.0.0.1:$2/no/such/file.ts")
    if [ "$TLS" = 1 ]; then
        echo "$1 TLS: $(openssl s_client -connect "127.0.0.1:$2" -brief </dev/null 2>&1 |
            grep -E 'Protocol version|Ciphersuite' | tr '\n' ' ')" >>"$OUT/env.txt"
    fi
    [ "$got" = 404 ] || die "$1: GET of a missing file answered $got, not 404"
}

start_nginx() {
    local conf="$TMP/nginx.conf" user_line="" d
    port_free "$NGINX_PORT" || die "port $NGINX_PORT is in use"
    for d in client_body proxy fastcgi uwsgi scgi; do mkdir -p "$TMP/$d"; done
    # As root, workers run as root too, so they can read any library path.
    [ "$(id -u)" = 0 ] && user_line="user root;"
    sed -e "s|@USER_LINE@|$user_line|" -e "s|@CPU_MASK@|$(cpu_mask "$SERVER_CPU")|" \
        -e "s|@TMP@|$TMP|g" -e "s|@PORT@|$NGINX_PORT|g" -e "s|@ROOT@|$ROOT|g" \
        -e "s|@CC_M3U8@|$CC_M3U8|g" -e "s|@CC_TS@|$CC_TS|g" \
        -e "s|@SSL@|$([ "$TLS" = 1 ] && echo " ssl")|g" \
        "$BENCH_DIR/nginx.conf.in" >"$conf"
    if [ "$ACCESS_LOG" = 1 ]; then
        sed -i "s|^    access_log off;|    access_log $TMP/nginx-access.log combined buffer=512k flush=1s;|" "$conf"
        grep -q "nginx-access.log" "$conf" || die "nginx.conf.in: no 'access_log off;' line to replace"
    fi
    cp "$conf" "$OUT/nginx.conf"
    nginx -t -q -e "$TMP/nginx-error.log" -p "$TMP" -c "$conf" ||
        die "nginx -t failed: $(cat "$TMP/nginx-error.log" 2>/dev/null)"
    taskset -c "$SERVER_CPU" nginx -e "$TMP/nginx-error.log" -p "$TMP" -c "$conf" \
        -g 'daemon off;' >"$TMP/nginx.stdout" 2>&1 &
    SERVER_PID=$!
    wait_ready "$NGINX_PORT" "$SERVER_PID" ||
        die "nginx did not come up: $(tail -n 5 "$TMP/nginx-error.log" 2>/dev/null)"
    PORT=$NGINX_PORT
}

start_hlsedge() {
    local conf="$TMP/hlsedge.yaml"
    port_free "$HLSEDGE_PORT" || die "port $HLSEDGE_PORT is in use"
    local plain_port=$HLSEDGE_PORT
    # TLS: HTTPS on the port, plain HTTP moved out of the way
    [ "$TLS" = 1 ] && plain_port=$((HLSEDGE_PORT + 1000))
    sed -e "s|@CPU@|$SERVER_CPU|g" -e "s|@PORT@|$plain_port|g" -e "s|@ROOT@|$ROOT|g" \
        -e "s|@MAX_CONNS@|$((CONNS * 4 > 4096 ? CONNS * 4 : 4096))|g" \
        -e "s|@CC_M3U8@|$CC_M3U8|g" -e "s|@CC_TS@|$CC_TS|g" \
        "$BENCH_DIR/hlsedge.yaml.in" >"$conf"
    if [ "$ACCESS_LOG" = 1 ]; then
        sed -i "s|^  access: \"\"|  access: \"$TMP/hlsedge-access.log\"|" "$conf"
        grep -q "hlsedge-access.log" "$conf" || die "hlsedge.yaml.in: no 'access: \"\"' line to replace"
    fi
    if [ "$TLS" = 1 ]; then
        printf 'tls:\n  listen: ["127.0.0.1:%s"]\n  certificates: ["%s"]\n' \
            "$HLSEDGE_PORT" "$TMP/tls.pem" >>"$conf"
    fi
    cp "$conf" "$OUT/hlsedge.yaml"
    "$HLSEDGE" -t -c "$conf" >"$TMP/hlsedge-t.log" 2>&1 ||
        die "hlsedge -t failed: $(cat "$TMP/hlsedge-t.log")"
    taskset -c "$SERVER_CPU" "$HLSEDGE" -c "$conf" >"$TMP/hlsedge.log" 2>&1 &
    SERVER_PID=$!
    wait_ready "$HLSEDGE_PORT" "$SERVER_PID" ||
        die "hlsedge did not come up: $(tail -n 5 "$TMP/hlsedge.log" 2>/dev/null)"
    PORT=$HLSEDGE_PORT
}

stop_server() { # stop_server NAME
    stop_pid "$SERVER_PID" TERM
    SERVER_PID=""
    if [ -f "$TMP/$1-access.log" ]; then
        echo "$1 access log: $(wc -l <"$TMP/$1-access.log") lines" >>"$OUT/env.txt"
        rm -f "$TMP/$1-access.log"
    fi
    case "$1" in
        nginx) cp "$TMP/nginx-error.log" "$OUT/nginx-error.log" 2>/dev/null || true ;;
        hlsedge) cp "$TMP/hlsedge.log" "$OUT/hlsedge.log" 2>/dev/null || true ;;
    esac
}

run_wrk() { # run_wrk DURATION PATHS_FILE LOG
    taskset -c "$CLIENT_CPU" wrk -t "$THREADS" -c "$CONNS" -d "$1" --timeout 10s --latency \
        -s "$BENCH_DIR/random-paths.lua" "$SCHEME://127.0.0.1:$PORT" -- "$2" >"$3" 2>&1 &
    WRK_PID=$!
    local rc=0
    wait "$WRK_PID" || rc=$?
    WRK_PID=""
    [ $rc = 0 ] || die "wrk failed (rc $rc): $(tail -n 5 "$3")"
}

# One measured phase: appends a raw line to $OUT/raw.tsv.
measure() { # measure SERVER PHASE
    local server=$1 phase=$2 paths="$OUT/paths-$2.txt" wlog="$OUT/wrk-$1-$2.txt"
    local pids t0 t1 b0 b1 res
    if [ "$WARMUP" != 0 ]; then
        run_wrk "$WARMUP" "$paths" "$TMP/warmup.txt"
    fi
    # shellcheck disable=SC2207
    pids=($(server_pids "$SERVER_PID"))
    if [ "$PERF" = 1 ]; then
        local plist
        plist=$(IFS=,; echo "${pids[*]}")
        taskset -c "$CLIENT_CPU" perf record -q -e cpu-clock -g -p "$plist" \
            -o "$OUT/perf-$server-$phase.data" >"$TMP/perf.log" 2>&1 &
        PERF_PID=$!
        sleep 0.5
    fi
    t0=$(cpu_ticks "${pids[@]}")
    b0=$(cpu_busy_ticks "$SERVER_CPU")
    run_wrk "$DURATION" "$paths" "$wlog"
    t1=$(cpu_ticks "${pids[@]}")
    b1=$(cpu_busy_ticks "$SERVER_CPU")
    if [ "$PERF" = 1 ]; then
        stop_pid "$PERF_PID" INT
        PERF_PID=""
        perf report -i "$OUT/perf-$server-$phase.data" --stdio --no-children \
            --sort dso,sym -g none --percent-limit 0.1 2>/dev/null |
            grep -v '^#' | grep -v '^$' | head -n 30 >"$OUT/perf-$server-$phase.txt" || true
    fi
    res=$(grep '^WRK_RESULT ' "$wlog" | tail -n 1) || die "no WRK_RESULT in $wlog"
    printf '%s\t%s\t%s\tcpu_ticks=%s\tcpu0_ticks=%s\n' "$server" "$phase" "${res#WRK_RESULT }" \
        "$((t1 - t0))" "$((b1 - b0))" >>"$OUT/raw.tsv"
    log "$server $phase: $(sed -n 's/^Requests\/sec: *//p' "$wlog") req/s, server CPU $((t1 - t0)) ticks"
}

# ---------------------------------------------------------------- run
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "loadavg at start: $(cut -d" " -f1-3 /proc/loadavg)"
    echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) ($ncpu CPUs)"
    echo "nginx: $(nginx -v 2>&1 | sed 's/.*: //')"
    echo "wrk: threads=$THREADS conns=$CONNS duration=$DURATION warmup=$WARMUP on CPU $CLIENT_CPU"
    echo "servers: $SERVERS, one worker on CPU $SERVER_CPU"
    echo "library: $ROOT ($nseg segments, $npl playlists, $lib_bytes bytes)"
    echo "perf: $PERF"
    echo "access log: $([ "$ACCESS_LOG" = 1 ] && echo "on, combined, to a file" || echo off)"
    echo "tls: $TLS$([ "$TLS" = 1 ] && echo " (ECDSA P-256; kernel tls ULP: $(grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null && echo yes || echo no))")"
} >"$OUT/env.txt"
: >"$OUT/raw.tsv"

# Warm the page cache so that neither server pays for disk reads.
find "$ROOT" -type f -exec cat {} + >/dev/null

for server in $SERVERS; do
    log "starting $server"
    "start_$server"
    check_responses "$server" "$PORT"
    for phase in $PHASES; do
        measure "$server" "$phase"
    done
    stop_server "$server"
done

python3 - "$OUT/raw.tsv" "$CLK_TCK" "$OUT/env.txt" >"$OUT/results.txt" <<'PY'
import sys

raw, clk, envf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
order = []
for line in open(raw):
    parts = line.rstrip("\n").split("\t")
    server, phase = parts[0], parts[1]
    kv = {}
    for field in " ".join(parts[2:]).split():
        k, v = field.split("=")
        kv[k] = int(v)
    secs = kv["duration_us"] / 1e6
    cpu = kv["cpu_ticks"] / clk
    cpu0 = kv["cpu0_ticks"] / clk
    gb = kv["bytes"] / 1e9
    req = kv["requests"]
    errs = sum(kv[k] for k in kv if k.startswith("err_"))
    r = {
        "req/s": req / secs,
        "GB/s": gb / secs,
        "p99 ms": kv["p99_us"] / 1000,
        "CPU-s": cpu,
        "CPU %": 100 * cpu / secs,
        "CPU-s/GB": cpu / gb if gb else float("nan"),
        "CPU-s/1k req": 1000 * cpu / req if req else float("nan"),
        "GB/CPU-s": gb / cpu if cpu else float("nan"),
        "req/CPU-s": req / cpu if cpu else float("nan"),
        "cpu0 busy-s": cpu0,
        "errors": errs,
        "requests": req,
    }
    rows[(server, phase)] = r
    order.append((server, phase))

cols = ["req/s", "GB/s", "p99 ms", "CPU-s", "CPU %", "CPU-s/GB", "CPU-s/1k req",
        "GB/CPU-s", "req/CPU-s", "cpu0 busy-s", "errors"]

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

print(open(envf).read().rstrip())
print()
print("CPU-s: server utime+stime (/proc/<pid>/stat, CLK_TCK=%d; nginx: master+worker)." % clk)
print("cpu0 busy-s: busy time of the server's CPU (/proc/stat), incl. softirq.")
print("GB = 1e9 bytes read by wrk (headers + bodies).")
print()
w = 14
print("%-9s %-10s" % ("server", "phase") + "".join(c.rjust(w) for c in cols))
for key in order:
    r = rows[key]
    print("%-9s %-10s" % key + "".join(fmt(r[c]).rjust(w) for c in cols))

warn = [k for k in order if rows[k]["errors"]]
for k in warn:
    print(f"WARNING: {k[0]} {k[1]}: {rows[k]['errors']} errors (connect/read/write/status/timeout)")
busy = set()
for k in order:
    other = rows[k]["cpu0 busy-s"] - rows[k]["CPU-s"]
    secs = rows[k]["CPU-s"] / (rows[k]["CPU %"] / 100) if rows[k]["CPU %"] else 0
    if secs and other > 0.15 * secs:
        busy.add(k)
        print(f"note: {k[0]} {k[1]}: the server CPU was busy {other:.2f} s beyond the server's own "
              "time (softirq, or other processes: is the machine quiet?)")
for k in order:
    if rows[k]["CPU %"] < 90 and k not in busy:
        print(f"note: {k[0]} {k[1]}: server CPU {rows[k]['CPU %']:.0f}% < 90%: "
              "not saturated, the client may be the limit; compare the per-CPU-second columns")

phases = sorted({p for _, p in order}, key=["segments", "playlists"].index)
if all(("hlsedge", p) in rows and ("nginx", p) in rows for p in phases) and phases:
    print()
    print("ratios hlsedge/nginx (throughput and per-CPU-s: >1 is better for hlsedge;"
          " p99 and CPU cost: <1 is better)")
    rc = ["req/s", "GB/s", "p99 ms", "CPU-s/GB", "CPU-s/1k req", "GB/CPU-s", "req/CPU-s"]
    print("%-20s" % "phase" + "".join(c.rjust(w) for c in rc))
    for p in phases:
        a, b = rows[("hlsedge", p)], rows[("nginx", p)]
        vals = [a[c] / b[c] if b[c] else float("nan") for c in rc]
        print("%-20s" % p + "".join(f"{v:.3f}".rjust(w) for v in vals))
PY

cat "$OUT/results.txt"
echo
extra=""; [ "$PERF" = 1 ] && extra=", perf-*.txt"
echo "vs-nginx: results in $OUT/results.txt (also raw.tsv, wrk-*.txt, configs$extra)"
