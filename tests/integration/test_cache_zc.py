"""Zero-copy sends of RAM-tier hits through the real binary.

By default (cache.ram_huge_pages: auto) the RAM tier lives in anonymous
transparent huge pages and a large hit over plain TCP leaves by vmsplice
of them (counted). With cache.ram_huge_pages: false and cache.ram_sendfile
(the default) it lives in a memfd and a large hit over plain TCP leaves by
vmsplice of its mapping (cache.ram_splice, counted), or with
cache.ram_splice: false by sendfile from it: checked here
that no SEND_ZC is made, bodies are byte-identical, the log names the path,
and, for both, that bytes a socket still holds when their object is evicted
and its memory refilled with another object reach the viewer unchanged (the
freed chunks are punched out of the memfd, so the queued skbs and pipes
keep the old pages; the huge-page arena drops them with MADV_DONTNEED).

The SEND_ZC path (cache.ram_sendfile: false):

Over loopback the kernel copies every SEND_ZC after all (the receiving
socket is local), and says so in the notification when asked
(IORING_SEND_ZC_REPORT_USAGE, Linux 6.2). The server counts both
(hlsedge_cache_zc_sends_total, hlsedge_cache_zc_copied_total) and stops
using zero-copy on a connection once the kernel reports a copy, because a
copied SEND_ZC costs more than a plain send (docs/performance.md, "send vs
send_zc"). Checked here:

  - large RAM hits are sent zero-copy at first, bodies byte-identical, and
    every notification reports "copied" on loopback;
  - further large hits on the same keep-alive connection use plain sends
    (no new zero-copy sends), bodies still byte-identical;
  - a new connection tries zero-copy again (the route may differ);
  - cache.zero_copy_adapt: false keeps zero-copy on;
  - with send_zc disabled (features.disable: [send_zc]) nothing is sent
    zero-copy and bodies are right.

Skips (77) when the kernel lacks SEND_ZC or REPORT_USAGE."""

import http.client
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, blob, expect, expect_eq, run_main  # noqa: E402
from he_admin import metric_sum, metrics_text, parse_metrics, stats  # noqa: E402
from origin import Origin  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-cache-zc-")
ROOT = os.path.join(TMP, "lib")
os.makedirs(ROOT, exist_ok=True)
SIZE = 3 << 20  # three 1 MiB spans: zero-copy (threshold 256 KiB)


DATA = {"/zc/a.ts": blob(SIZE, 1), "/zc/b.ts": blob(SIZE, 2)}


def server(origin, cache_extra="  ram_sendfile: false\n", disable_features=None):
    """cache_extra: more lines for the cache: section (default: the SEND_ZC path).
    The memfd and SEND_ZC paths are the ones without huge pages."""
    if "ram_huge_pages" not in cache_extra:
        cache_extra += "  ram_huge_pages: false\n"
    extra = ("cache:\n  ram_size: 64m\n  prefetch: 0\n  admission: false\n" + cache_extra +
             'origin:\n  urls: ["%s"]\n  retries: 0\n' % origin.url)
    return Server(ROOT, extra=extra, workers=1, admin=True, disable_features=disable_features)


def zc(srv):
    s = parse_metrics(metrics_text(srv))
    return (metric_sum(s, "hlsedge_cache_zc_sends_total"),
            metric_sum(s, "hlsedge_cache_zc_copied_total"))


def fetch(conn, path):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    expect_eq(r.status, 200, "status of %s" % path)
    expect(body == DATA[path], "body of %s is byte-identical (%d bytes)" % (path, len(body)))


def hits(srv, rounds):
    """Both objects, rounds times, on one keep-alive connection."""
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
    try:
        for _ in range(rounds):
            fetch(c, "/zc/a.ts")
            fetch(c, "/zc/b.ts")
    finally:
        c.close()


def warm(srv):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
    try:
        for p in DATA:  # the fills: the objects are in RAM after them
            fetch(c, p)
    finally:
        c.close()


def settle(srv, want_sends, timeout=5.0):
    """The notifications come after the responses: wait for them."""
    deadline = time.time() + timeout
    cur = zc(srv)
    while time.time() < deadline and cur[0] < want_sends:
        time.sleep(0.05)
        cur = zc(srv)
    return cur


def features(srv):
    return stats(srv)["features"]["io_uring"]


def test_copied_then_plain():
    with Origin(files=DATA) as o, server(o) as srv:
        f = features(srv)
        if not f.get("send_zc") or not f.get("zc_report_usage"):
            print("SKIP part: send_zc=%s zc_report_usage=%s" % (f.get("send_zc"), f.get("zc_report_usage")))
            return
        warm(srv)
        s0, c0 = zc(srv)
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
        try:
            fetch(c, "/zc/a.ts")
            s1, c1 = settle(srv, s0 + 1)
            expect(s1 > s0, "a large RAM hit went zero-copy (%d -> %d sends)" % (s0, s1))
            expect_eq(s1 - s0, c1 - c0, "loopback: every zero-copy send reported as copied")
            for _ in range(3):
                fetch(c, "/zc/b.ts")
                fetch(c, "/zc/a.ts")
            s2, c2 = settle(srv, s1 + 1, timeout=1.0)  # none should come
            expect_eq(s2, s1, "no zero-copy on the connection after the kernel reported a copy")
        finally:
            c.close()
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
        try:
            fetch(c, "/zc/b.ts")
            s3, _ = settle(srv, s2 + 1)
            expect(s3 > s2, "a new connection tries zero-copy again")
        finally:
            c.close()


def test_adapt_off_keeps_zero_copy():
    with Origin(files=DATA) as o, server(o, cache_extra="  ram_sendfile: false\n  zero_copy_adapt: false\n") as srv:
        f = features(srv)
        if not f.get("send_zc") or not f.get("zc_report_usage"):
            print("SKIP part: no send_zc or zc_report_usage")
            return
        warm(srv)
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
        try:
            fetch(c, "/zc/a.ts")
            s1, _ = settle(srv, 1)
            for _ in range(3):
                fetch(c, "/zc/b.ts")
            s2, c2 = settle(srv, s1 + 3)
            expect(s2 >= s1 + 3, "zero-copy stays on: %d -> %d sends" % (s1, s2))
            expect_eq(c2, s2, "all copied on loopback")
        finally:
            c.close()


def test_send_zc_disabled():
    with Origin(files=DATA) as o, server(o, disable_features=["send_zc"]) as srv:
        expect(not features(srv).get("send_zc"), "send_zc reported off")
        expect(not features(srv).get("zc_report_usage"), "zc_report_usage off with send_zc")
        warm(srv)
        hits(srv, 2)
        expect_eq(zc(srv), (0, 0), "nothing sent zero-copy")


def vmspliced(srv):
    return metric_sum(parse_metrics(metrics_text(srv)), "hlsedge_cache_ram_vmsplice_bytes_total")


def vmsplice_hits(srv):
    """Warms the tier, then three rounds of large hits: none by SEND_ZC,
    every body byte counted as vmspliced. The server's log."""
    warm(srv)
    before = vmspliced(srv)
    hits(srv, 3)
    expect_eq(zc(srv), (0, 0), "large RAM hits do not use SEND_ZC")
    expect_eq(vmspliced(srv) - before, 3 * (len(DATA["/zc/a.ts"]) + len(DATA["/zc/b.ts"])),
              "every byte of the hits vmspliced")
    return srv.read_log()


def test_ram_vmsplice():
    """With the memfd arena (cache.ram_huge_pages: false): large RAM hits
    over plain TCP by vmsplice of the memfd's mapping; the counter shows
    every hit's body went that way."""
    with Origin(files=DATA) as o, server(o, cache_extra="") as srv:
        log = vmsplice_hits(srv)
        expect("vmsplice of the arena's mapping" in log, "the log names the RAM send path")
        expect_eq(stats(srv)["cache"]["ram_arena"], "memfd", "/stats names the arena")


def test_ram_huge_pages():
    """cache.ram_huge_pages: auto (the default) with no TLS listener: the
    arena is anonymous huge pages (when the kernel gives them), large hits
    over plain TCP leave by vmsplice of it, counted like the memfd's."""
    thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read() if os.path.exists(
        "/sys/kernel/mm/transparent_hugepage/enabled") else "[never]"
    if "[never]" in thp:
        print("skip: transparent huge pages are off in this kernel")
        return
    with Origin(files=DATA) as o, server(o, cache_extra="  ram_huge_pages: auto\n") as srv:
        log = vmsplice_hits(srv)
        expect("RAM tier of 64 MiB in anonymous huge pages (auto)" in log, "the log names the arena")
        expect_eq(stats(srv)["cache"]["ram_arena"], "huge_pages", "/stats names the arena")
        expect_eq(metric_sum(parse_metrics(metrics_text(srv)), "hlsedge_cache_ram_arena_info",
                             arena="huge_pages"), 1, "/metrics names the arena")
        expect("vmsplice of the arena's huge pages" in log, "the log names the RAM send path")
        with open("/proc/%d/smaps_rollup" % srv.proc.pid) as f:
            huge = [int(l.split()[1]) for l in f if l.startswith("AnonHugePages:")]
        expect(huge and huge[0] >= 2048, "the arena's filled part is in huge pages: %r kB" % huge)


def test_ram_sendfile():
    with Origin(files=DATA) as o, server(o, cache_extra="  ram_splice: false\n") as srv:
        warm(srv)
        hits(srv, 3)
        expect_eq(zc(srv), (0, 0), "large RAM hits leave by sendfile, not SEND_ZC")
        expect_eq(vmspliced(srv), 0, "nothing vmspliced")
        log = srv.read_log()
        expect("sendfile from the arena's memfd" in log, "the log names the RAM send path")


# Many distinct objects of 512 KiB through a 16 MiB RAM tier (its floor).
EVICT = {"/ev/%03d.ts" % i: blob(512 << 10, 100 + i) for i in range(80)}


def evicted_while_queued(splice, huge=False, fill=False):
    """A response whose bytes all went to the socket but were not read yet:
    its object is evicted and the chunks reused by later fills. The viewer
    must still read the original bytes. fill: that response is the fill's
    own (a miss, sent by copy: nothing vmspliced), not a hit."""
    with Origin(files=EVICT) as o, Server(ROOT, extra=(
            "cache:\n  ram_size: 16m\n  prefetch: 0\n  admission: false\n  zero_copy_min: 64k\n"
            "  ram_splice: %s\n  ram_huge_pages: %s\n"
            'origin:\n  urls: ["%s"]\n  retries: 0\n' % ("true" if splice else "false",
                                                          "true" if huge else "false", o.url)),
            workers=1, admin=True) as srv:
        first = "/ev/000.ts"
        if not fill:
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
            c.request("GET", first)  # the fill: now in RAM
            expect(c.getresponse().read() == EVICT[first], "fill of %s" % first)
            c.close()
        # A reader that does not read: a receive buffer (root may force it
        # past rmem_max) big enough that the whole body is queued at once.
        sock = socket.socket()
        try:
            sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.connect(("127.0.0.1", srv.port))
        sock.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % first.encode())
        time.sleep(0.5)  # the server hands the kernel all it takes
        other = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
        try:
            for p in sorted(EVICT)[1:]:  # 40 MB through 16 MiB: the first is evicted
                other.request("GET", p)
                expect(other.getresponse().read() == EVICT[p], "fill of %s" % p)
        finally:
            other.close()
        sock.settimeout(20)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + len(EVICT[first]):
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        sock.close()
        body = data[data.index(b"\r\n\r\n") + 4:]
        expect_eq(len(body), len(EVICT[first]), "length of the queued response")
        expect(body == EVICT[first], "the queued response is the original bytes after its memory was reused")
        ev = metric_sum(parse_metrics(metrics_text(srv)), "hlsedge_cache_evictions_total")
        expect(ev >= 30, "the first object's memory was evicted and reused (%d evictions)" % ev)
        if fill:
            expect_eq(vmspliced(srv), 0, "misses are sent by copy")
        else:
            expect((vmspliced(srv) > 0) == splice, "sent by %s" % ("vmsplice" if splice else "sendfile"))


def test_ram_sendfile_evicted_while_queued():
    evicted_while_queued(False)


def test_ram_vmsplice_evicted_while_queued():
    evicted_while_queued(True)


def test_ram_huge_pages_evicted_while_queued():
    """The huge-page arena drops a freed run with MADV_DONTNEED: the pipe
    and the queued skbs keep the old pages."""
    evicted_while_queued(True, huge=True)


def test_fill_evicted_while_queued():
    """The same for a miss's response: copied into the socket, so its chunks
    are reused as they are (not dropped), and the viewer still reads the
    original bytes."""
    evicted_while_queued(True, huge=True, fill=True)


def test_fill_readers_copy():
    """A fill's reader takes copies and a hit goes by reference, in both
    arenas that drop lent chunks: an object that is never hit is never lent
    to the kernel, so evicting it drops nothing (cache/ram.c)."""
    for extra in ("  ram_huge_pages: true\n", ""):
        with Origin(files=DATA) as o, server(o, cache_extra=extra) as srv:
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
            try:
                fetch(c, "/zc/a.ts")  # the miss
                expect_eq(vmspliced(srv), 0, "the miss is sent by copy (%s)" % extra.strip())
                fetch(c, "/zc/a.ts")  # the hit
                expect_eq(vmspliced(srv), SIZE, "the hit is vmspliced (%s)" % extra.strip())
            finally:
                c.close()


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
