"""Copies of files under root in huge pages, through the real binary
(server/handler/fcopy.c, fcache.c he_fcache_copy, file.c): a file of 1 to
16 MiB asked for a second time over plain TCP is read into anonymous
huge-page memory shared by the workers (fd_cache.memory) and sent from it
by vmsplice.

Checked here: the first request goes from the mapping and the next ones
from the copy, byte-identical, whole and as ranges, counted on /stats and
/metrics, in AnonHugePages, also as HTTP/2 frames; one copy for all
workers; none for files under 1 MiB or over 16 MiB, over TLS, with the key
at 0 or send.file_splice off, each saying so in the log; a file replaced
by rename is served new once the entry is re-checked, and its old copy
goes; a file truncated in place is served whole from its copy until then;
a full budget sends from the mapping and counts the refusal; a reload to
fd_cache.memory 0 frees them; and a response still in the socket keeps its
bytes when its copy is freed and the memory taken by the next.
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from he import Server, connect, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import admin_get, reload_and_wait, stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-fcopy-")
ROOT = make_library(os.path.join(TMP, "lib"))
MISC = os.path.join(ROOT, "misc")
os.makedirs(MISC, exist_ok=True)
MIB = 1 << 20


def put(name, data):
    """Published as packagers do: written aside, renamed over."""
    tmp = os.path.join(MISC, "." + name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, os.path.join(MISC, name))
    return data


BIG = put("big.ts", os.urandom(3 * MIB + 12345))  # 4 MiB copy: a huge page and one for the rest


def copies(srv):
    return stats(srv)["fd_cache"]["copies"]


def copy_bytes(srv):
    return stats(srv)["send"]["file_copy_bytes"]


def metric(srv, name):
    total = 0
    for line in admin_get(srv, "/metrics").body.decode().split("\n"):
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def thp_on():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


def plain(extra="", **kw):
    return Server(ROOT, admin=True, tls=False, extra="fd_cache:\n  valid: 1s\n" + extra, **kw)


def test_second_request_from_the_copy():
    if not thp_on():
        with plain() as srv:
            expect("no copies of files in huge pages (transparent huge pages are off" in srv.read_log(),
                   "the log says why there are no copies")
            expect_eq(srv.get("/misc/big.ts").body, BIG, "body")
        return
    with plain() as srv:
        expect("fd_cache: copies of files of 1-16 MiB in huge pages, up to 256 MiB" in srv.read_log(),
               "the log names the copies")
        r = srv.get("/misc/big.ts")
        expect(r.body == BIG, "first body identical")
        expect_eq(copies(srv)["made"], 0, "a file asked for once is not copied")
        expect_eq(copy_bytes(srv), 0, "first response from the mapping")
        for _ in range(3):
            r = srv.get("/misc/big.ts")
            expect_eq(r.status, 200)
            expect(r.body == BIG, "body from the copy identical")
        c = copies(srv)
        expect_eq((c["made"], c["count"], c["bytes"], c["memory"]), (1, 1, 4 * MIB, 256 * MIB), "one copy")
        n = copy_bytes(srv)
        # the last span of each response (under 64 KiB) goes by sendfile
        expect(3 * (len(BIG) - (64 << 10)) <= n <= 3 * len(BIG), "from the copy: %d" % n)
        expect_eq(metric(srv, "hlsedge_file_copy_bytes_total"), n, "/metrics agrees")
        expect_eq(metric(srv, "hlsedge_fd_cache_copy_bytes"), 4 * MIB, "/metrics: copy bytes")
        expect_eq(metric(srv, "hlsedge_fd_cache_copies_kept"), 1, "/metrics: copies")
        expect(stats(srv)["send"]["file_vmsplice_bytes"] >= n, "counted among vmspliced file bytes")
        for first, last in ((1, MIB), (4095, 2 * MIB + 7), (len(BIG) - 200000, len(BIG) - 1)):
            r = srv.get("/misc/big.ts", headers={"Range": "bytes=%d-%d" % (first, last)})
            expect_eq(r.status, 206)
            expect(r.body == BIG[first:last + 1], "range %d-%d from the copy" % (first, last))
        expect(copy_bytes(srv) > n, "ranges from the copy")
        with open("/proc/%d/smaps_rollup" % srv.proc.pid) as f:
            huge = [int(l.split()[1]) for l in f if l.startswith("AnonHugePages:")]
        expect(huge and huge[0] >= 2048, "the copy is in huge pages: AnonHugePages %s kB" % huge)


def test_one_copy_for_all_workers():
    if not thp_on():
        return
    with plain(workers=2) as srv:
        for _ in range(12):  # new connections: both workers, each asked several times
            s = srv.conn()
            r = s.request("GET", "/misc/big.ts")
            s.close()
            expect(r.body == BIG, "body identical")
        c = copies(srv)
        expect_eq((c["made"], c["count"]), (1, 1), "the workers share one copy")
        expect(copy_bytes(srv) > 0, "sent from it")


def test_h2c_frames_from_the_copy():
    """HTTP/2 cleartext: DATA frames of a copied file leave from the copy's
    memory, byte-identical."""
    if not thp_on():
        return
    from he_h2 import get_once
    with plain("http2:\n  h2c: true\n") as srv:
        for _ in range(3):
            hdrs, body = get_once(srv.port, "/misc/big.ts", wait=30)
            expect_eq(hdrs.get(":status"), "200")
            expect(body == BIG, "h2c body identical (%d of %d bytes)" % (len(body), len(BIG)))
        expect_eq(copies(srv)["made"], 1, "copied on the second stream")


def test_no_copies():
    small = put("small.ts", os.urandom(MIB - 1))
    large = put("large.ts", os.urandom(16 * MIB + 1))
    with plain() as srv:
        for _ in range(3):
            expect(srv.get("/misc/small.ts").body == small, "small body")
            expect(srv.get("/misc/large.ts").body == large, "large body")
        expect_eq(copies(srv)["made"], 0, "files under 1 MiB and over 16 MiB keep their mapping")
    for extra, why in (("  memory: 0\n", "fd_cache.memory: 0"),
                       ("send:\n  file_splice: false\n", "send.file_splice: false")):
        with plain(extra) as srv:
            for _ in range(3):
                expect(srv.get("/misc/big.ts").body == BIG, "body")
            expect_eq(copies(srv)["made"], 0, "no copies with %s" % why)
            expect("fd_cache: no copies of files in huge pages (%s)" % why in srv.read_log(), "the log says %s" % why)
    with Server(ROOT, admin=True, tls=True, extra="fd_cache:\n  valid: 1s\n") as srv:
        for _ in range(3):
            expect(srv.get("/misc/big.ts").body == BIG, "TLS body")
        expect_eq(copies(srv)["made"], 0, "TLS reads the mapping: no copy")


def test_replaced_and_truncated():
    if not thp_on():
        return
    v1 = put("live.ts", os.urandom(2 * MIB + 777))
    with plain() as srv:
        for _ in range(2):
            expect(srv.get("/misc/live.ts").body == v1, "v1")
        expect_eq(copies(srv)["made"], 1, "v1 copied")
        v2 = put("live.ts", os.urandom(2 * MIB + 999))
        time.sleep(1.3)  # fd_cache.valid
        for _ in range(2):
            expect(srv.get("/misc/live.ts").body == v2, "v2 once re-checked")
        c = copies(srv)
        expect_eq((c["made"], c["count"]), (2, 1), "v2 copied, v1's copy gone with its entry")
        # truncated in place: the copy is what the file held when read
        with open(os.path.join(MISC, "live.ts"), "r+b") as f:
            f.truncate(MIB)
        r = srv.get("/misc/live.ts")
        expect(r.body == v2, "whole from the copy until the re-check (%d bytes)" % len(r.body))
        time.sleep(1.3)
        r = srv.get("/misc/live.ts")
        expect(r.body == v2[:MIB], "the new size once re-checked (%d bytes)" % len(r.body))


def test_full_budget_sends_from_the_mapping():
    if not thp_on():
        return
    a = put("a.ts", os.urandom(3 * MIB))
    b = put("b.ts", os.urandom(3 * MIB))
    with plain("  memory: 6m\n") as srv:
        for _ in range(2):
            expect(srv.get("/misc/a.ts").body == a, "a")
        for _ in range(2):
            expect(srv.get("/misc/b.ts").body == b, "b, from its mapping")
        c = copies(srv)
        expect_eq((c["made"], c["count"], c["bytes"]), (1, 1, 4 * MIB), "a's copy only: it is in use")
        expect(c["refused"] >= 1, "the refusal counted: %s" % c)
        expect_eq(metric(srv, "hlsedge_fd_cache_copy_events_total"), c["made"] + c["evicted"] + c["refused"],
                  "/metrics counts the events")


def test_reload_to_no_copies():
    """fd_cache.memory set to 0 by a reload: the new generation makes no
    copies, and the old one's go once it has drained."""
    if not thp_on():
        return
    with plain() as srv:
        for _ in range(2):
            expect(srv.get("/misc/big.ts").body == BIG, "body")
        expect_eq(copies(srv)["count"], 1, "copied")
        with open(srv.conf) as f:
            conf = f.read()
        with open(srv.conf, "w") as f:
            f.write(conf.replace("fd_cache:\n", "fd_cache:\n  memory: 0\n"))
        reload_and_wait(srv, 2)
        wait_for(lambda: copies(srv)["count"] == 0, 10, "the old generation's copy freed")
        for _ in range(3):
            expect(srv.get("/misc/big.ts").body == BIG, "body after the reload")
        c = copies(srv)
        expect_eq((c["memory"], c["bytes"], c["made"]), (0, 0, 1), "no copies after the reload")
        expect("fd_cache: no copies of files in huge pages (fd_cache.memory: 0)" in srv.read_log(),
               "the reload's log says so")


def test_freed_copy_under_a_queued_response():
    """A response still in the socket when its copy is freed, and the memory
    given to the next copy, arrives with the old bytes."""
    if not thp_on():
        return
    v1 = put("q.ts", os.urandom(3 * MIB))
    with plain("  memory: 8m\n") as srv:
        for _ in range(2):
            expect(srv.get("/misc/q.ts").body == v1, "v1")
        s = connect(srv.port, rcvbuf=65536)
        s.sendall(b"GET /misc/q.ts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.3)  # the socket and the pipe fill, unread
        v2 = put("q.ts", os.urandom(3 * MIB))
        time.sleep(1.3)
        for _ in range(2):  # v1's entry goes (stale); v2's copy takes the room
            expect(srv.get("/misc/q.ts").body == v2, "v2")
        got = b""
        s.settimeout(20)
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += chunk
        s.close()
        body = got[got.index(b"\r\n\r\n") + 4:]
        expect(body == v1, "the queued response has v1's bytes (%d of %d)" % (len(body), len(v1)))
        expect(copies(srv)["made"] >= 2, "v2 was copied")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
