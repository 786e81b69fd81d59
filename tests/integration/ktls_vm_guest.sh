#!/bin/sh
# Runs inside the kTLS VM (busybox sh, see test_ktls_vm.py): hlsedge with a
# TLS listener; segments fetched over HTTPS by curl and openssl s_client
# for every suite kTLS can take, and over HTTP/2 (curl --http2); then the same bulk workload with kTLS on
# and off for the CPU ratio. Prints RESULT/SERVER/BENCH lines for the host.
cd /work || exit 125
P=8443
SEG_SIZE=$(wc -c <lib/seg.ts)
BIG_SIZE=$(wc -c <lib/big.ts)
WANT_SEG=$(sha256sum lib/seg.ts | cut -d' ' -f1)
WANT_PL=$(sha256sum lib/index.m3u8 | cut -d' ' -f1)
BENCH_N=${BENCH_N:-0}
rc=0

tx() { awk '$1=="TlsTxSw"{print $2}' /proc/net/tls_stat; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
busy() { awk '$1=="cpu"{print $2+$3+$4+$7+$8}' /proc/stat; } # whole guest, incl. softirq
up() { cut -d' ' -f1 /proc/uptime; }

start_server() { # config label
    ./hlsedge -c "$1" >"/tmp/server-$2.log" 2>&1 &
    SPID=$!
    i=0
    until netstat -ltn 2>/dev/null | grep -q ":$P "; do
        sleep 0.1
        i=$((i + 1))
        if [ $i -gt 300 ] || ! kill -0 $SPID 2>/dev/null; then
            echo "SERVER_START_FAILED $2"
            cat "/tmp/server-$2.log"
            return 1
        fi
    done
}
stop_server() { # label
    kill $SPID
    wait $SPID
    echo "SERVER_EXIT $1 $?"
}

check() { # tool label file want
    got=$(sha256sum "$3" | cut -d' ' -f1)
    ok=MISMATCH
    [ "$got" = "$4" ] && ok=MATCH
    [ $ok = MATCH ] || rc=1
    echo "RESULT $1 $2 sha256=$ok bytes=$(wc -c <"$3") txsw=$(tx)"
}

# curl LABEL HOST CURL-ARGS...: the segment, and on the first call also a
# playlist (a RAM body: send on the kTLS socket) and a range (sendfile at
# an offset).
fetch_curl() {
    label=$1 host=$2
    shift 2
    curl -sS --cacert ca.crt --resolve "$host:$P:127.0.0.1" "$@" -o /tmp/out \
        "https://$host:$P/seg.ts" || rc=1
    check curl "$label" /tmp/out "$WANT_SEG"
}

fetch_sclient() { # LABEL HOST S_CLIENT-ARGS...
    label=$1 host=$2
    shift 2
    printf 'GET /seg.ts HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$host" |
        openssl s_client -connect 127.0.0.1:$P -servername "$host" -CAfile ca.crt -quiet "$@" \
            >/tmp/resp 2>/tmp/sclient.err || true
    head -c 12 /tmp/resp | grep -q 'HTTP/1.1 200' || { echo "SCLIENT_ERROR $label"; head -c 300 /tmp/sclient.err; rc=1; }
    tail -c "$SEG_SIZE" /tmp/resp >/tmp/out
    check s_client "$label" /tmp/out "$WANT_SEG"
}

echo "TLS_STAT_BEFORE $(tx) uptime=$(up)"
start_server ktls.yaml ktls || exit 1
# extra bodies over kTLS: a RAM-served playlist and a range of the segment
curl -sS --cacert ca.crt --resolve "hlsedge.test:$P:127.0.0.1" -o /tmp/pl \
    "https://hlsedge.test:$P/index.m3u8" || rc=1
check curl playlist /tmp/pl "$WANT_PL"
curl -sS --cacert ca.crt --resolve "hlsedge.test:$P:127.0.0.1" -r 100000-1099999 -o /tmp/rg \
    "https://hlsedge.test:$P/seg.ts" || rc=1
tail -c +100001 lib/seg.ts | head -c 1000000 >/tmp/rg.want
check curl range /tmp/rg "$(sha256sum /tmp/rg.want | cut -d' ' -f1)"
# HTTP/1.1 (the fetches above are HTTP/2) from an offset off the page,
# over several sendfile chunks
curl -sS --http1.1 --cacert ca.crt --resolve "hlsedge.test:$P:127.0.0.1" -r 5000-3004999 -o /tmp/rg1 \
    "https://hlsedge.test:$P/big.ts" || rc=1
tail -c +5001 lib/big.ts | head -c 3000000 >/tmp/rg1.want
check curl-h1 range /tmp/rg1 "$(sha256sum /tmp/rg1.want | cut -d' ' -f1)"

for s in TLS_AES_128_GCM_SHA256 TLS_AES_256_GCM_SHA384 TLS_CHACHA20_POLY1305_SHA256; do
    fetch_curl "tls1.3/$s" hlsedge.test --tlsv1.3 --tls13-ciphers "$s"
    fetch_sclient "tls1.3/$s" hlsedge.test -tls1_3 -ciphersuites "$s"
done
for s in ECDHE-RSA-AES128-GCM-SHA256 ECDHE-RSA-AES256-GCM-SHA384 ECDHE-RSA-CHACHA20-POLY1305; do
    fetch_curl "tls1.2/$s" hlsedge.test --tlsv1.2 --tls-max 1.2 --ciphers "$s"
    fetch_sclient "tls1.2/$s" hlsedge.test -tls1_2 -cipher "$s"
done
for s in ECDHE-ECDSA-AES128-GCM-SHA256 ECDHE-ECDSA-AES256-GCM-SHA384 ECDHE-ECDSA-CHACHA20-POLY1305; do
    fetch_curl "tls1.2/$s" b.test --tlsv1.2 --tls-max 1.2 --ciphers "$s"
    fetch_sclient "tls1.2/$s" b.test -tls1_2 -cipher "$s"
done
# kTLS cuts the records: a new connection's first response record holds
# the head alone (tls.first_record: the head goes without MSG_MORE).
# TLS 1.2, where the records after the handshake are the response's.
printf 'GET /seg.ts HTTP/1.1\r\nHost: hlsedge.test\r\nConnection: close\r\n\r\n' |
    openssl s_client -connect 127.0.0.1:$P -servername hlsedge.test -CAfile ca.crt -quiet -tls1_2 \
        -cipher ECDHE-RSA-AES128-GCM-SHA256 -msg -msgfile /tmp/msg >/tmp/resp1 2>/dev/null || true
hdr=$(awk '/^<<< .*RecordHeader/ { getline; if ($1 == "17") { print $4 $5; exit } }' /tmp/msg)
echo "KTLS_FIRST_RECORD $((0x${hdr:-0})) response=$(wc -c </tmp/resp1)"
# HTTP/2 on kTLS (ALPN h2): DATA frames of a segment by sendfile behind
# their 9-byte headers, a range, then two streams multiplexed on one
# connection (a segment and a RAM-served playlist; curl --parallel waits
# for the first connection's ALPN and adds the second stream to it). The
# host's curl has nghttp2.
v=$(curl -sS --http2 --cacert ca.crt --resolve "hlsedge.test:$P:127.0.0.1" -o /tmp/h2seg \
    -w '%{http_version}' "https://hlsedge.test:$P/seg.ts") || rc=1
echo "H2_VERSION single $v"
[ "$v" = 2 ] || rc=1
check curl-h2 segment /tmp/h2seg "$WANT_SEG"
curl -sS --http2 --cacert ca.crt --resolve "hlsedge.test:$P:127.0.0.1" -r 100000-1099999 \
    -o /tmp/h2rg "https://hlsedge.test:$P/seg.ts" || rc=1
check curl-h2 range /tmp/h2rg "$(sha256sum /tmp/rg.want | cut -d' ' -f1)"
curl -sS --http2 --parallel --cacert ca.crt --resolve "hlsedge.test:$P:127.0.0.1" \
    -o /tmp/h2m1 "https://hlsedge.test:$P/seg.ts" -o /tmp/h2m2 "https://hlsedge.test:$P/index.m3u8" || rc=1
check curl-h2 mux-segment /tmp/h2m1 "$WANT_SEG"
check curl-h2 mux-playlist /tmp/h2m2 "$WANT_PL"
echo "STATS_H2 $(curl -s http://127.0.0.1:9090/stats | tr -d '\n' | grep -o '"http2":{"connections":{[^}]*},"requests":{[^}]*}')"
echo "STATS $(curl -s http://127.0.0.1:9090/stats | tr -d '\n' | grep -o '"tls":{[^}]*}')"
# seg.ts (1.5 MB) went out many times, all by sendfile: no copy in huge pages
echo "STATS_COPIES $(curl -s http://127.0.0.1:9090/stats | tr -d '\n' | grep -o '"copies":{[^}]*}')"
stop_server ktls
grep -E 'kTLS|TLS totals|TLSv1' /tmp/server-ktls.log | sed 's/^/SERVER_LOG /'
echo "TLS_STAT_AFTER $(tx) uptime=$(up)"

# The same bulk workload (TLS 1.3, AES-128-GCM, BENCH_N x big.ts), kTLS on
# and off: the server's CPU time per byte.
bench() { # label config
    start_server "$2" "bench-$1" || return 1
    c0=$(cpu $SPID)
    b0=$(busy)
    t0=$(up)
    i=0
    while [ $i -lt "$BENCH_N" ]; do
        curl -s --cacert ca.crt --resolve "hlsedge.test:$P:127.0.0.1" --tlsv1.3 \
            --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /tmp/big "https://hlsedge.test:$P/big.ts" || rc=1
        i=$((i + 1))
    done
    c1=$(cpu $SPID)
    b1=$(busy)
    t1=$(up)
    [ "$(wc -c </tmp/big)" = "$BIG_SIZE" ] || rc=1
    echo "BENCH $1 bytes=$((BENCH_N * BIG_SIZE)) server_cpu_ticks=$((c1 - c0)) guest_busy_ticks=$((b1 - b0)) wall_s=$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}')"
    stop_server "bench-$1"
    grep 'TLS totals' "/tmp/server-bench-$1.log" | sed "s/^/SERVER_LOG bench-$1 /"
}
if [ "$BENCH_N" -gt 0 ]; then
    bench ktls ktls.yaml
    bench userspace userspace.yaml
fi
echo "GUEST_RC $rc uptime=$(up)"
exit $rc
