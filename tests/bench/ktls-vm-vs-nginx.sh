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
#
# Prints one BENCH line per run, a median table and the ratio; every run
# also shows the guest's /proc/net/tls_stat TlsTxSw delta, which proves the
# kernel encrypted (a run without it is reported as not kTLS).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUN_SH=${KTLS_VM_RUN:-$REPO/../shared/tools/ktls-vm/run.sh}
HLSEDGE=${HLSEDGE:-$REPO/build/hlsedge}
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
        listen 127.0.0.1:8443 ssl;
        ssl_certificate /work/cert.pem;
        ssl_certificate_key /work/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_conf_command Options KTLS;
        root /work/lib;
    }
}
EOF
cat >"$STAGE/guest.sh" <<'EOF'
#!/bin/sh
# In the VM (busybox sh): ROUNDS x (hlsedge, nginx), each FETCHES x big.ts.
cd /work || exit 125
SIZE=$(wc -c <lib/big.ts)
tx() { awk '$1=="TlsTxSw"{print $2}' /proc/net/tls_stat; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
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
    hlsedge) taskset -c 0 ./hlsedge -c hlsedge.yaml >/tmp/hlsedge.log 2>&1 & ;;
    nginx) taskset -c 0 "$NGINX" -e stderr -p /tmp -c /work/nginx.conf >/tmp/nginx.log 2>&1 & ;;
    esac
    SPID=$!
    wait_port || { echo "START_FAILED $1"; cat /tmp/$1.log /tmp/nginx-error.log 2>/dev/null; kill $SPID; return 1; }
    # one warm-up fetch: the page cache and the session are not measured
    curl -s --cacert cert.pem --resolve bench.test:8443:127.0.0.1 --tlsv1.3 \
        --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /dev/null https://bench.test:8443/big.ts
    x0=$(tx); c0=$(cpu $SPID); i=0; bad=0
    while [ $i -lt "$FETCHES" ]; do
        n=$(taskset -c 1 curl -s --cacert cert.pem --resolve bench.test:8443:127.0.0.1 --tlsv1.3 \
            --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /dev/null -w '%{size_download}' \
            https://bench.test:8443/big.ts)
        [ "$n" = "$SIZE" ] || bad=$((bad + 1))
        i=$((i + 1))
    done
    c1=$(cpu $SPID); x1=$(tx)
    echo "BENCH $1 bytes=$((FETCHES * SIZE)) cpu_ticks=$((c1 - c0)) ktls_sockets=$((x1 - x0)) short=$bad"
    kill $SPID; wait $SPID 2>/dev/null
}
echo "TLS_STAT $(tx)"
r=0
while [ $r -lt "$ROUNDS" ]; do
    run hlsedge
    run nginx
    r=$((r + 1))
done
echo "GUEST_DONE"
EOF

# ---------------------------------------------------------------- run
bash "$RUN_SH" --files "$STAGE" --bin "$(command -v curl)" --bin "$NGINX" \
    -e "ROUNDS=$ROUNDS" -e "FETCHES=$FETCHES" -e "NGINX=$NGINX" --timeout 1500 -- sh guest.sh \
    >"$OUT/guest.txt" 2>"$OUT/run.txt" || { tail -n 30 "$OUT/guest.txt" "$OUT/run.txt" >&2; die "VM run failed"; }
grep -E '^(BENCH|START_FAILED|TLS_STAT)' "$OUT/guest.txt" || true

python3 - "$OUT/guest.txt" <<'PY' | tee "$OUT/summary.txt"
import re, statistics, sys
runs = {}
for m in re.finditer(r"^BENCH (\S+) bytes=(\d+) cpu_ticks=(\d+) ktls_sockets=(\d+) short=(\d+)",
                     open(sys.argv[1]).read(), re.M):
    name, b, t, k, short = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))
    if short or k == 0:
        print(f"{name}: a run {'with short bodies' if short else 'without kTLS sockets'} is left out")
        continue
    runs.setdefault(name, []).append(b / max(t, 1) * 100 / 1e6)  # MB per server CPU-second (100 ticks/s)
for name, v in runs.items():
    print(f"{name:8s} MB per server CPU-s: median {statistics.median(v):.1f} "
          f"(min {min(v):.1f}, max {max(v):.1f}, {len(v)} runs)")
if "hlsedge" in runs and "nginx" in runs:
    print(f"hlsedge / nginx: {statistics.median(runs['hlsedge']) / statistics.median(runs['nginx']):.2f}")
PY
