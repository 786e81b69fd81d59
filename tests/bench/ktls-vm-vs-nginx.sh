#!/usr/bin/env bash
# hlsedge against nginx with kernel TLS, inside a VM whose kernel has it
# (../shared/tools/ktls-vm/run.sh: Debian's kernel under QEMU; this host's
# kernel has no tls ULP). Both serve the same file over TLS 1.3
# AES-128-GCM with kTLS and sendfile: hlsedge with tls.ktls on, nginx with
# `ssl_conf_command Options KTLS; sendfile on;`. One client (curl) fetches
# it N times per run; the servers alternate, ROUNDS runs each, and the
# server's CPU time per byte is compared. The VM is emulated (TCG), so the
# absolute figures mean nothing; the ratio between the two servers does.
#
#   bash tests/bench/ktls-vm-vs-nginx.sh
#   ROUNDS=5 FETCHES=3 SIZE_MB=16 bash tests/bench/ktls-vm-vs-nginx.sh
#   HLSEDGE_EXTRA=$'send:\n  cork: true' bash tests/bench/ktls-vm-vs-nginx.sh
#   HLSEDGE_B=/tmp/old/hlsedge bash tests/bench/ktls-vm-vs-nginx.sh   # two builds
#   PROTO=http2 bash tests/bench/ktls-vm-vs-nginx.sh   # both servers over HTTP/2
#   PERF=40 bash tests/bench/ktls-vm-vs-nginx.sh       # each run's top 40 symbols
#
# Both servers speak the same protocol to curl: HTTP/1.1 unless PROTO says
# http2 (curl offers h2 in ALPN unasked, and hlsedge takes it where nginx
# without `http2` does not, so the protocol is always set).
#
# Prints one BENCH line per run, a median table and the ratio; every run
# also shows the guest's /proc/net/tls_stat TlsTxSw delta, which proves the
# kernel encrypted (a run without it is reported as not kTLS).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUN_SH=${KTLS_VM_RUN:-$REPO/../shared/tools/ktls-vm/run.sh}
HLSEDGE=${HLSEDGE:-$REPO/build/hlsedge}
HLSEDGE_B=${HLSEDGE_B:-}
PROTO=${PROTO:-http1.1}
case "$PROTO" in http1.1) NGINX_H2= ;; http2) NGINX_H2=" http2" ;; *) echo "PROTO: http1.1 or http2" >&2; exit 2 ;; esac
ROUNDS=${ROUNDS:-5}
FETCHES=${FETCHES:-3}
SIZE_MB=${SIZE_MB:-16}
OUT=${OUT:-$REPO/var/bench/ktls-vm-$(date +%Y%m%d-%H%M%S)}

die() { echo "ktls-vm-vs-nginx: $*" >&2; exit 1; }
[ -f "$RUN_SH" ] || die "$RUN_SH missing"
[ -x "$HLSEDGE" ] || die "$HLSEDGE missing (bash scripts/build.sh)"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || die "nginx missing (bash scripts/setup.sh)"
mkdir -p "$OUT"
STAGE=$(mktemp -d /tmp/he-ktls-bench-XXXXXX)
trap 'rm -rf "$STAGE"' EXIT

# ---------------------------------------------------------------- stage
cp "$HLSEDGE" "$STAGE/hlsedge"
SERVERS="hlsedge nginx"
if [ -n "$HLSEDGE_B" ]; then
    [ -x "$HLSEDGE_B" ] || die "$HLSEDGE_B missing"
    cp "$HLSEDGE_B" "$STAGE/hlsedge-b"
    SERVERS="hlsedge hlsedge-b nginx"
fi
mkdir -p "$STAGE/lib"
head -c $((SIZE_MB << 20)) /dev/urandom >"$STAGE/lib/big.ts"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=bench.test -addext subjectAltName=DNS:bench.test \
    -keyout "$STAGE/key.pem" -out "$STAGE/cert.pem" 2>/dev/null
cat "$STAGE/cert.pem" "$STAGE/key.pem" >"$STAGE/both.pem"
cat >"$STAGE/hlsedge.yaml" <<'EOF'
listen: ["127.0.0.1:8080"]
workers: 1
cpus: [0]
root: /work/lib
tls:
  listen: ["127.0.0.1:8443"]
  certificates: [/work/both.pem]
  ktls: true
EOF
# HLSEDGE_EXTRA: more YAML for hlsedge, e.g. $'send:\n  sendfile_chunk: 2m'
[ -n "${HLSEDGE_EXTRA:-}" ] && printf '%s\n' "$HLSEDGE_EXTRA" >>"$STAGE/hlsedge.yaml"
cat >"$STAGE/nginx.conf" <<'EOF'
daemon off;
master_process off;
worker_processes 1;
error_log /tmp/nginx-error.log;
pid /tmp/nginx.pid;
events { worker_connections 1024; }
http {
    types { video/mp2t ts; }
    access_log off;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=1000 inactive=60s;
    client_body_temp_path /tmp/nginx-body;
    proxy_temp_path /tmp/nginx-proxy;
    fastcgi_temp_path /tmp/nginx-fastcgi;
    uwsgi_temp_path /tmp/nginx-uwsgi;
    scgi_temp_path /tmp/nginx-scgi;
    server {
        listen 127.0.0.1:8443 ssl@NGINX_H2@;
        ssl_certificate /work/cert.pem;
        ssl_certificate_key /work/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_conf_command Options KTLS;
        root /work/lib;
    }
}
EOF
sed -i "s/@NGINX_H2@/$NGINX_H2/" "$STAGE/nginx.conf"
cat >"$STAGE/guest.sh" <<'EOF'
#!/bin/sh
# In the VM (busybox sh): ROUNDS x (hlsedge, nginx), each FETCHES x big.ts.
cd /work || exit 125
SIZE=$(wc -c <lib/big.ts)
tx() { awk '$1=="TlsTxSw"{print $2}' /proc/net/tls_stat; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
# on-CPU nanoseconds of every thread (the scheduler's clock, not ticks)
cpu_ns() { cat /proc/$1/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
# write-side system calls (sendfile counts as one, write and writev too;
# send on a socket does not)
writes() { awk '$1=="syscw:"{print $2}' /proc/$1/io; }
threads() { # pid: "tid ticks voluntary involuntary comm" per thread
    for t in /proc/$1/task/*; do
        echo "${t##*/} $(awk '{print $14+$15}' $t/stat)" \
            "$(awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' $t/status)" \
            "$(cat $t/comm)"
    done
}
wait_port() {
    i=0
    until netstat -ltn 2>/dev/null | grep -q ":8443 "; do
        sleep 0.1; i=$((i + 1))
        [ $i -gt 300 ] && return 1
    done
    return 0 # the loop's own status is its body's last command's
}
run() { # label
    case $1 in
    hlsedge*) taskset -c 0 ./$1 -c hlsedge.yaml >/tmp/$1.log 2>&1 & ;;
    nginx) taskset -c 0 "$NGINX" -e stderr -p /tmp -c /work/nginx.conf >/tmp/nginx.log 2>&1 & ;;
    esac
    SPID=$!
    wait_port || { echo "START_FAILED $1"; cat /tmp/$1.log /tmp/nginx-error.log 2>/dev/null; kill $SPID; return 1; }
    # one warm-up fetch: the page cache and the session are not measured
    curl -s --$PROTO --cacert cert.pem --resolve bench.test:8443:127.0.0.1 --tlsv1.3 \
        --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /dev/null https://bench.test:8443/big.ts
    threads $SPID >/tmp/threads.0
    if [ -n "$PERF" ]; then
        perf record -q -e cpu-clock -C 0 -o /tmp/perf.$1.data >/dev/null 2>&1 &
        PERFPID=$!
        sleep 1
    fi
    x0=$(tx); c0=$(cpu $SPID); n0=$(cpu_ns $SPID); w0=$(writes $SPID); i=0; bad=0
    while [ $i -lt "$FETCHES" ]; do
        n=$(taskset -c 1 curl -s --$PROTO --cacert cert.pem --resolve bench.test:8443:127.0.0.1 --tlsv1.3 \
            --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /dev/null -w '%{size_download}' \
            https://bench.test:8443/big.ts)
        [ "$n" = "$SIZE" ] || bad=$((bad + 1))
        i=$((i + 1))
    done
    c1=$(cpu $SPID); n1=$(cpu_ns $SPID); x1=$(tx); w1=$(writes $SPID)
    if [ -n "$PERF" ]; then
        kill -INT $PERFPID; wait $PERFPID
        perf report -i /tmp/perf.$1.data --stdio -n --sort comm,dso,sym 2>/dev/null |
            grep -v '^#' | grep -v '^$' | head -n "$PERF" | sed "s/^/PERF $1 /"
    fi
    echo "BENCH $1 bytes=$((FETCHES * SIZE)) cpu_ticks=$((c1 - c0)) ktls_sockets=$((x1 - x0)) short=$bad" \
        "write_calls=$((w1 - w0)) cpu_ns=$(awk -v a=$n0 -v b=$n1 'BEGIN{printf "%.0f", b-a}')"
    # where the ticks went: each thread's CPU and sleeps during the fetches
    threads $SPID >/tmp/threads.1
    awk -v s="$1" 'NR==FNR { t[$1]=$2; v[$1]=$3; n[$1]=$4; next }
        { print "THREAD " s " " $5 " ticks=" $2-t[$1] " vol=" $3-v[$1] " invol=" $4-n[$1] }' \
        /tmp/threads.0 /tmp/threads.1
    kill $SPID; wait $SPID 2>/dev/null
}
echo "TLS_STAT $(tx)"
r=0
while [ $r -lt "$ROUNDS" ]; do
    for s in $SERVERS; do run $s; done
    r=$((r + 1))
done
echo "GUEST_DONE"
EOF

# ---------------------------------------------------------------- run
bash "$RUN_SH" --files "$STAGE" --bin "$(command -v curl)" --bin "$NGINX" \
    ${PERF:+--bin "$(command -v perf)"} -e "PERF=${PERF:-}" \
    -e "ROUNDS=$ROUNDS" -e "FETCHES=$FETCHES" -e "NGINX=$NGINX" -e "PROTO=$PROTO" -e "SERVERS=$SERVERS" --timeout 1500 -- sh guest.sh \
    >"$OUT/guest.txt" 2>"$OUT/run.txt" || { tail -n 30 "$OUT/guest.txt" "$OUT/run.txt" >&2; die "VM run failed"; }
grep -E '^(BENCH|THREAD|PERF|START_FAILED|TLS_STAT)' "$OUT/guest.txt" || true

python3 - "$OUT/guest.txt" <<'PY' | tee "$OUT/summary.txt"
import re, statistics, sys
runs, calls, ns = {}, {}, {}
for m in re.finditer(r"^BENCH (\S+) bytes=(\d+) cpu_ticks=(\d+) ktls_sockets=(\d+) short=(\d+) "
                     r"write_calls=(\d+) cpu_ns=(\d+)", open(sys.argv[1]).read(), re.M):
    name = m.group(1)
    b, t, k, short, wc, cns = (int(x) for x in m.groups()[1:])
    if short or k == 0:
        print(f"{name}: a run {'with short bodies' if short else 'without kTLS sockets'} is left out")
        continue
    runs.setdefault(name, []).append(b / max(t, 1) * 100 / 1e6)  # MB per server CPU-second (100 ticks/s)
    ns.setdefault(name, []).append(b / max(cns, 1) * 1e3)  # the same from the scheduler's clock
    calls.setdefault(name, []).append(wc / (b / 1e6))
for name, v in runs.items():
    print(f"{name:9s} MB per server CPU-s: median {statistics.median(v):.1f} "
          f"(min {min(v):.1f}, max {max(v):.1f}, {len(v)} runs); by the scheduler's clock "
          f"{statistics.median(ns[name]):.1f} ({min(ns[name]):.1f}-{max(ns[name]):.1f}); "
          f"write-side calls per MB {statistics.median(calls[name]):.2f}")
med = {name: statistics.median(v) for name, v in runs.items()}
mns = {name: statistics.median(v) for name, v in ns.items()}
for a, b in (("hlsedge", "nginx"), ("hlsedge-b", "nginx"), ("hlsedge", "hlsedge-b")):
    if a in med and b in med:
        # round by round too: a drifting host moves both runs of a round alike
        pairs = sorted(x / y for x, y in zip(ns[a], ns[b]))
        print(f"{a} / {b}: {med[a] / med[b]:.2f} (ticks), {mns[a] / mns[b]:.2f} (scheduler's clock); "
              f"per round {statistics.median(pairs):.2f} ({pairs[0]:.2f}-{pairs[-1]:.2f})")
PY
