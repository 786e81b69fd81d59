"""kTLS for real: hlsedge inside a QEMU VM booted with Debian's kernel,
where the tls module loads (../shared/tools/ktls-vm/run.sh; this host's
kernel has no kTLS). In the guest (ktls_vm_guest.sh) curl and openssl
s_client fetch a segment over HTTPS for every suite kTLS takes (TLS 1.3:
AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305; TLS 1.2: ECDHE-RSA and
ECDHE-ECDSA with the same three), plus a RAM-served playlist and a range,
and HTTP/2 on kTLS: curl --http2 (the host's curl, built with nghttp2,
copied into the guest; it offers h2 in ALPN, so its other fetches are
HTTP/2 as well) fetches a segment and a range on a connection each,
then a segment and the playlist with --parallel, two streams on one
connection (on two, should curl not wait for the first one's ALPN); curl
must say HTTP/2, the bodies match and the server counts h2 connections on
TLS (all on kTLS, like every other connection here) and four streams.
Checks: bodies byte-identical (sha256), the server reports kTLS for every
one of those connections (its per-handshake log line and its totals), and
/proc/net/tls_stat's TlsTxSw rises by at least that many sockets; a new
connection's first response record holds the head alone (tls.first_record,
read with openssl s_client -msg), and no
file was copied into huge pages (fd_cache.copies.made 0: kTLS sends the
file itself, by sendfile). Then the
same bulk download with tls.ktls on and off, for the server-CPU ratio.

Exit 77 (skipped) where QEMU, a static busybox or run.sh is missing, and
for sanitizer builds (the plain pass covers it; ASan under TCG is slow).
HE_KTLS_VM_BENCH=N adds N bulk downloads of 16 MB per mode, kTLS on and off,
and prints the server-CPU ratio (default 0: the ctest run checks the kTLS
path only and takes about a minute; N=4 adds about 3 minutes under TCG).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from he import BIN, SRC, expect, expect_eq, make_certs  # noqa: E402

RUN_SH = os.environ.get("KTLS_VM_RUN") or os.path.join(SRC, "..", "shared", "tools", "ktls-vm", "run.sh")
SUITES = 3 * 3  # TLS 1.3 x3, TLS 1.2 RSA x3, TLS 1.2 ECDSA x3
H2_FETCHES = 4  # curl --http2: a segment, a range; a segment and the playlist multiplexed
H1_FETCHES = 2 * SUITES + 3  # curl + s_client per suite, the playlist, the range, an HTTP/1.1 range
# curl offers h2 in ALPN unasked: its fetches per suite, the playlist and
# the range are HTTP/2 streams too (s_client's are HTTP/1.1)
CURL_FETCHES = SUITES + 2
RESULTS = H1_FETCHES + H2_FETCHES  # bodies checked
H1_PROBES = 1  # openssl s_client -msg reading the first response record's size


def skip_reason():
    if not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 missing (bash scripts/setup.sh --ktls-vm)"
    bb = "/bin/busybox"
    if not os.path.exists(bb) or subprocess.run(["ldd", bb], capture_output=True).returncode == 0:
        return "static busybox missing (bash scripts/setup.sh --ktls-vm)"
    if not os.path.exists(RUN_SH):
        return "%s missing" % RUN_SH
    if not os.path.exists(BIN):
        return "%s missing" % BIN
    if b"libasan" in subprocess.run(["ldd", BIN], capture_output=True).stdout:
        return "sanitizer build: run in the plain pass only"
    return None


CONF = """listen: ["127.0.0.1:8080"]
workers: 2
root: /work/lib
admin:
  listen: "127.0.0.1:9090"
log:
  level: debug
tls:
  listen: ["127.0.0.1:8443"]
  certificates: [/work/default.pem, /work/b.pem]
  ktls: %s
"""


def stage(d):
    certs = make_certs()
    shutil.copy(BIN, os.path.join(d, "hlsedge"))
    for k in ("default", "b"):
        shutil.copy(certs[k], os.path.join(d, k + ".pem"))
    shutil.copy(certs["ca"], os.path.join(d, "ca.crt"))
    shutil.copy(os.path.join(HERE, "ktls_vm_guest.sh"), os.path.join(d, "guest.sh"))
    lib = os.path.join(d, "lib")
    os.makedirs(lib)
    with open(os.path.join(lib, "seg.ts"), "wb") as f:
        f.write(os.urandom(1500000 + 1234))
    with open(os.path.join(lib, "big.ts"), "wb") as f:
        f.write(os.urandom(16 << 20))
    with open(os.path.join(lib, "index.m3u8"), "w") as f:
        f.write("#EXTM3U\n#EXT-X-TARGETDURATION:6\n" + "#EXTINF:6.0,\nseg.ts\n" * 50 + "#EXT-X-ENDLIST\n")
    for mode, on in (("ktls", "true"), ("userspace", "false")):
        with open(os.path.join(d, mode + ".yaml"), "w") as f:
            f.write(CONF % on)


class Skip(Exception):
    pass


def test_ktls_in_vm():
    d = tempfile.mkdtemp(prefix="he-ktls-vm-")
    try:
        stage(d)
        bench_n = os.environ.get("HE_KTLS_VM_BENCH", "0")
        t0 = time.time()
        r = subprocess.run(["bash", RUN_SH, "--files", d, "--bin", shutil.which("curl"), "-e", "BENCH_N=" + bench_n,
                            "--timeout", "800", "--", "sh", "guest.sh"],
                           capture_output=True, text=True, errors="replace", timeout=900)
        took = time.time() - t0
        out = r.stdout
        if r.returncode == 125 and "KTLS_VM_READY" not in out:
            # the VM could not be prepared or booted (no apt lists for the
            # kernel download, no tls module): an environment problem
            print("  VM setup failed, skipped:\n" + "\n".join(r.stderr.strip().splitlines()[-5:]))
            raise Skip()
        print("  VM run: %.1f s (exit %d)" % (took, r.returncode), flush=True)
        for line in (r.stderr.strip().splitlines()[-3:]):
            print("  " + line)
        if r.returncode != 0:
            print(out[-6000:])
        results = re.findall(r"^RESULT (\S+) (\S+) sha256=(\w+) bytes=(\d+)", out, re.M)
        expect_eq(len(results), RESULTS, "fetches reported")
        bad = [x for x in results if x[2] != "MATCH"]
        expect(not bad, "bodies differ: %s" % bad)

        # the server says kTLS for every connection of the kTLS run
        hs = re.findall(r"^SERVER_LOG .*fd \d+: (TLSv1\.[23]) (\S+), send ([^,]+),", out, re.M)
        h2st = re.search(r'^STATS_H2 "http2":\{"connections":\{"http/1.1":(\d+),"h2":(\d+),"h2c":(\d+)\},'
                         r'"requests":\{"http/1.1":(\d+),"h2":(\d+)\}', out, re.M)
        expect(h2st, "h2 counters reported")
        h2_conns = int(h2st.group(2)) - CURL_FETCHES  # those of the --http2 fetches
        expect(h2_conns in (3, 4) and int(h2st.group(3)) == 0, "h2 connections over TLS: %s" % h2st.group(0))
        conns = H1_FETCHES + H1_PROBES + h2_conns  # connections, each one handshake
        expect_eq(len(hs), conns, "handshakes logged")
        not_ktls = [h for h in hs if h[2] != "kTLS"]
        expect(not not_ktls, "connections without kTLS send: %s" % not_ktls)
        suites = {h[1] for h in hs}
        for s in ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                  "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305",
                  "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                  "ECDHE-ECDSA-CHACHA20-POLY1305"):
            expect(s in suites, "suite %s used" % s)
        expect("kTLS: on" in out, "start-up log: kTLS on")
        tot = re.search(r"SERVER_LOG .*TLS totals: (\d+) handshakes .*connections: kTLS (\d+), userspace (\d+) "
                        r"\(kTLS fallback (\d+), sealed by hlsedge (\d+)\); bytes: kTLS (\d+), userspace (\d+)", out)
        expect(tot, "TLS totals of the kTLS run")
        expect_eq(int(tot.group(2)), conns, "connections on kTLS (server totals)")
        expect_eq(int(tot.group(3)), 0, "connections on SSL_write")
        expect_eq(int(tot.group(5)), 0, "none sealed by hlsedge: the kernel took every suite")
        expect(int(tot.group(6)) > SUITES * 2 * 1500000, "bytes through kTLS")
        # HTTP/2 on kTLS: curl saw HTTP/2, the server counted h2 connections
        # and streams (their handshakes are among the kTLS ones above)
        expect_eq(re.findall(r"^H2_VERSION single (\S*)", out, re.M), ["2"], "curl --http2 got HTTP/2")
        h2res = [x for x in results if x[0] == "curl-h2"]
        expect_eq(len(h2res), H2_FETCHES, "h2 bodies checked")
        expect_eq(int(h2st.group(5)), CURL_FETCHES + H2_FETCHES, "h2 streams answered")
        expect_eq(int(h2st.group(1)), SUITES + 1 + H1_PROBES,
                  "HTTP/1.1 connections: s_client's, one curl --http1.1 and the record probe")
        print("  HTTP/2 on kTLS: %d connections, %d streams (%s), bodies match" % (
            h2_conns, H2_FETCHES, "two multiplexed" if h2_conns == 3 else "not multiplexed"))
        stats = re.search(r"^STATS (.*)$", out, re.M)
        print("  /stats tls: %s" % (stats.group(1) if stats else "-"))
        fr = re.search(r"^KTLS_FIRST_RECORD (\d+) response=(\d+)", out, re.M)
        expect(fr, "the first record's size from openssl s_client -msg")
        # the head (about 300 bytes) and AES-GCM's 24 bytes, not 16 KiB
        expect(0 < int(fr.group(1)) < 1400, "kTLS: the first response record holds the head alone: %s bytes"
               % fr.group(1))
        expect(int(fr.group(2)) > 1500000, "and the segment followed: %s bytes" % fr.group(2))
        print("  kTLS first response record: %s bytes" % fr.group(1))
        cp = re.search(r'^STATS_COPIES .*"made":(\d+)', out, re.M)
        expect(cp, "fd_cache.copies on /stats")
        expect_eq(int(cp.group(1)), 0, "kTLS sends files by sendfile: no copies in huge pages")
        print("  /stats fd_cache.copies: %s" % cp.group(0).split(" ", 1)[1])

        before = int(re.search(r"^TLS_STAT_BEFORE (\d+) uptime=([\d.]+)", out, re.M).group(1))
        m = re.search(r"^TLS_STAT_AFTER (\d+) uptime=([\d.]+)", out, re.M)
        after = int(m.group(1))
        print("  guest uptime: fetches done at %s s, all done at %s s" %
              (m.group(2), re.search(r"^GUEST_RC \d+ uptime=([\d.]+)", out, re.M).group(1)))
        expect(after - before >= conns, "TlsTxSw %d -> %d: rose by at least %d" % (before, after, conns))
        print("  /proc/net/tls_stat TlsTxSw: %d -> %d" % (before, after))

        bench = {m[0]: (int(m[1]), int(m[2]), float(m[3])) for m in
                 re.findall(r"^BENCH (\S+) bytes=(\d+) server_cpu_ticks=(\d+) guest_busy_ticks=\d+ wall_s=([\d.]+)",
                            out, re.M)}
        for line in re.findall(r"^BENCH .*$", out, re.M):
            print("  " + line)
        if int(bench_n) > 0:
            expect(set(bench) == {"ktls", "userspace"}, "both bench runs: %s" % bench)
            k, u = bench["ktls"], bench["userspace"]
            print("  bench (in the VM, TCG): kTLS %d ticks, %.1f s; userspace %d ticks, %.1f s for %d MB each"
                  % (k[1], k[2], u[1], u[2], k[0] >> 20))
            if k[1]:
                print("  server CPU per byte, userspace/kTLS: %.2fx; wall: %.2fx" % (u[1] / k[1], u[2] / k[2]))
            bt = re.findall(r"SERVER_LOG bench-(\w+) .*connections: kTLS (\d+), userspace (\d+)", out)
            for mode, kt, us in bt:
                expect((int(kt) > 0) == (mode == "ktls") and (int(us) > 0) == (mode == "userspace"),
                       "bench %s used its path (kTLS %s, userspace %s)" % (mode, kt, us))
        expect_eq(re.search(r"^GUEST_RC (\d+)", out, re.M).group(1), "0", "guest status")
        expect_eq(r.returncode, 0, "run.sh status")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    why = skip_reason()
    if why:
        print("skipped: " + why)
        return 77
    try:
        test_ktls_in_vm()
    except Skip:
        return 77
    except Exception:
        import traceback
        traceback.print_exc()
        print("FAIL test_ktls_in_vm")
        print("0 passed, 1 failed")
        return 1
    print("PASS test_ktls_in_vm")
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
