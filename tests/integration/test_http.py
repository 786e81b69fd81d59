"""HTTP/1.1 features through the real binary: methods, keep-alive,
pipelining, HTTP/1.0, ranges, conditionals, types and headers, and
byte-identical bodies. HE_TEST_DISABLE_FEATURES in the environment
(features.disable, see he.py) reruns the same tests on the fallback paths
(see test_fallback.py)."""

import email.utils
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Conn, Server, expect, expect_eq, make_library, run_with_server, sha256  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-http-")
ROOT = make_library(os.path.join(TMP, "lib"))
EXTRA = """cors:
  allow_origin: "https://player.example"
cache_control:
  m3u8: "public, max-age=2"
  ts: "public, max-age=31536000, immutable"
  key: "private, no-store"
"""
SRV = None


def lib(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def test_segments_byte_identical():
    for r in ("288p", "1080p"):
        for n in range(4):
            p = "%s/seg_%05d.ts" % (r, n)
            resp = SRV.get("/" + p)
            expect_eq(resp.status, 200, p)
            expect_eq(sha256(resp.body), sha256(lib(p)), p + " sha256")
            expect_eq(resp.h("content-length"), str(len(lib(p))), p + " length")
    big = SRV.get("/misc/big.ts")
    expect_eq(sha256(big.body), sha256(lib("misc/big.ts")), "big.ts sha256")


def test_curl_sha256():
    out = subprocess.run(["curl", "-sf"] + SRV.curl_args() + [SRV.url("/1080p/seg_00000.ts")],
                         capture_output=True, check=True).stdout
    expect_eq(sha256(out), sha256(lib("1080p/seg_00000.ts")), "curl body")


def test_head():
    r = SRV.get("/720p/seg_00001.ts", method="HEAD")
    expect_eq(r.status, 200)
    expect_eq(r.h("content-length"), str(len(lib("720p/seg_00001.ts"))))
    expect_eq(r.body, b"")
    # the connection stays usable: HEAD sent no body bytes
    c = SRV.conn()
    c.request("HEAD", "/master.m3u8")
    r2 = c.request("GET", "/master.m3u8")
    expect_eq(r2.body, lib("master.m3u8"))
    c.close()


def test_content_types():
    cases = {
        "/master.m3u8": "application/vnd.apple.mpegurl",
        "/360p/index.m3u8": "application/vnd.apple.mpegurl",
        "/360p/seg_00000.ts": "video/mp2t",
        "/misc/part.m4s": "video/iso.segment",
        "/misc/init.mp4": "video/mp4",
        "/misc/audio.aac": "audio/aac",
        "/misc/subs.vtt": "text/vtt",
        "/misc/aes.key": "application/octet-stream",
        "/misc/blob.bin": "application/octet-stream",
        "/misc/UPPER.TS": "video/mp2t",
    }
    for path, ctype in cases.items():
        r = SRV.get(path)
        expect_eq(r.status, 200, path)
        expect_eq(r.h("content-type"), ctype, path)


def test_cache_control_cors_date_server():
    r = SRV.get("/master.m3u8")
    expect_eq(r.h("cache-control"), "public, max-age=2", "m3u8")
    expect_eq(r.h("access-control-allow-origin"), "https://player.example")
    expect_eq(r.h("server"), "hlsedge")
    expect(re.match(r"^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$", r.h("date") or ""),
           "Date header %r" % r.h("date"))
    expect_eq(SRV.get("/360p/seg_00000.ts").h("cache-control"), "public, max-age=31536000, immutable")
    expect_eq(SRV.get("/misc/aes.key").h("cache-control"), "private, no-store")
    expect_eq(SRV.get("/misc/subs.vtt").h("cache-control"), "public, max-age=86400", "vtt default")


def test_heads_follow_the_clock():
    """A 200, 206 or 304 head starts with lines a worker spells once a
    second and copies (server/http/response.c): across a turn of the clock
    on one connection, each head's Date is the clock's, and what follows
    the copied lines is the response's own."""
    body = lib("master.m3u8")
    dates = []
    c = SRV.conn()
    try:
        for turn in range(2):
            if turn:
                time.sleep(1.2)
            r200 = c.request("GET", "/master.m3u8")
            r206 = c.request("GET", "/master.m3u8", {"Range": "bytes=0-9"})
            r304 = c.request("GET", "/master.m3u8", {"If-None-Match": r200.h("etag")})
            for r, status in ((r200, 200), (r206, 206), (r304, 304)):
                expect_eq(r.status, status)
                expect_eq(r.h("server"), "hlsedge")
                expect_eq(r.h("access-control-allow-origin"), "https://player.example")
                sent = email.utils.parsedate_to_datetime(r.h("date")).timestamp()
                expect(abs(sent - time.time()) < 2, "%d: Date %s is not now" % (status, r.h("date")))
            expect_eq(r200.body, body)
            expect_eq(r200.h("content-length"), str(len(body)))
            expect_eq(r206.body, body[:10])
            expect_eq(r206.h("content-range"), "bytes 0-9/%d" % len(body))
            expect_eq(r304.body, b"")
            for r in (r200, r206):
                expect_eq(r.h("access-control-expose-headers"), "Content-Length, Content-Range, ETag")
            dates.append(r200.h("date"))
        expect(dates[0] != dates[1], "the Date of a head a second later: %r" % dates)
    finally:
        c.close()


def test_options_preflight():
    r = SRV.get("/360p/seg_00000.ts", method="OPTIONS",
                headers={"Origin": "https://player.example", "Access-Control-Request-Method": "GET"})
    expect_eq(r.status, 204)
    expect_eq(r.h("access-control-allow-origin"), "https://player.example")
    expect("GET" in (r.h("access-control-allow-methods") or ""), "allow-methods")
    expect("Range" in (r.h("access-control-allow-headers") or ""), "allow-headers")
    expect_eq(r.h("allow"), "GET, HEAD, OPTIONS")
    r = SRV.get("*", method="OPTIONS")
    expect_eq(r.status, 204)


def test_other_methods_405():
    for m in ("POST", "PUT", "DELETE", "PATCH", "TRACE", "PROPFIND"):
        c = SRV.conn()
        r = c.request(m, "/master.m3u8")
        expect_eq(r.status, 405, m)
        expect_eq(r.h("allow"), "GET, HEAD, OPTIONS", m)
        c.close()
    # a body is never read: answered and closed
    c = SRV.conn()
    r = c.request("POST", "/x", headers={"Content-Length": "5"}, body=b"hello")
    expect_eq(r.status, 405)
    expect_eq(r.h("connection"), "close")
    expect(c.closed_by_peer(), "closed after a request with a body")


def test_keepalive_many_requests():
    c = SRV.conn()
    for i in range(50):
        p = "%s/seg_%05d.ts" % (["288p", "360p", "576p"][i % 3], i % 4)
        r = c.request("GET", "/" + p)
        expect_eq(r.status, 200)
        expect_eq(len(r.body), len(lib(p)))
        expect(r.h("connection") is None, "no Connection header on keep-alive 1.1")
    c.close()


def test_pipelining_in_order():
    paths = ["/master.m3u8", "/288p/index.m3u8", "/288p/seg_00000.ts", "/nope.ts", "/misc/aes.key",
             "/1080p/seg_00001.ts", "/misc/subs.vtt"] * 3
    c = SRV.conn()
    c.send("".join("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % p for p in paths))
    for p in paths:
        r = c.read_response()
        if p == "/nope.ts":
            expect_eq(r.status, 404, p)
        else:
            expect_eq(r.status, 200, p)
            expect_eq(r.body, lib(p[1:]), p)
    # pipelined HEAD and range requests mixed in, split at odd places
    c.send("HEAD /master.m3u8 HTTP/1.1\r\nHost: t\r\n\r\nGET /master.m3u8 HTTP/1.1\r\nHost: t\r\nRa")
    c.send("nge: bytes=0-6\r\n\r\n")
    expect_eq(c.read_response(head_only=True).status, 200)
    r = c.read_response()
    expect_eq((r.status, r.body), (206, b"#EXTM3U"))
    c.close()


def test_http10():
    c = SRV.conn()
    r = c.request("GET", "/master.m3u8", version="1.0")
    expect_eq(r.status, 200)
    expect_eq(r.h("connection"), "close")
    expect(c.closed_by_peer(), "HTTP/1.0 closes by default")
    c = SRV.conn()
    r = c.request("GET", "/master.m3u8", headers={"Connection": "keep-alive"}, version="1.0")
    expect_eq(r.h("connection"), "keep-alive")
    r = c.request("GET", "/360p/index.m3u8", headers={"Connection": "keep-alive"}, version="1.0")
    expect_eq(r.body, lib("360p/index.m3u8"))
    c.close()
    c = SRV.conn()
    r = c.request("GET", "/master.m3u8", headers={"Connection": "close"})
    expect_eq(r.h("connection"), "close")
    expect(c.closed_by_peer(), "Connection: close honoured")


def test_ranges():
    p = "1080p/seg_00000.ts"
    data = lib(p)
    n = len(data)
    r = SRV.get("/" + p, {"Range": "bytes=0-99"})
    expect_eq((r.status, r.body, r.h("content-range")), (206, data[:100], "bytes 0-99/%d" % n))
    r = SRV.get("/" + p, {"Range": "bytes=1000-"})
    expect_eq((r.status, r.body, r.h("content-range")), (206, data[1000:], "bytes 1000-%d/%d" % (n - 1, n)))
    r = SRV.get("/" + p, {"Range": "bytes=-500"})
    expect_eq((r.status, r.body, r.h("content-range")), (206, data[-500:], "bytes %d-%d/%d" % (n - 500, n - 1, n)))
    r = SRV.get("/" + p, {"Range": "bytes=%d-%d" % (n - 10, n + 1000)})
    expect_eq((r.status, r.body), (206, data[-10:]))
    r = SRV.get("/" + p, {"Range": "bytes=%d-" % n})
    expect_eq((r.status, r.h("content-range")), (416, "bytes */%d" % n))
    r = SRV.get("/" + p, {"Range": "bytes=0-1,5-6"})
    expect_eq((r.status, len(r.body)), (200, n))
    r = SRV.get("/" + p, {"Range": "items=0-1"})
    expect_eq(r.status, 200)
    # ranges of memory-served playlists too
    r = SRV.get("/master.m3u8", {"Range": "bytes=1-6"})
    expect_eq((r.status, r.body), (206, b"EXTM3U"))
    # If-Range with the current ETag honours the range, a stale one does not
    etag = SRV.get("/" + p, method="HEAD").h("etag")
    r = SRV.get("/" + p, {"Range": "bytes=0-9", "If-Range": etag})
    expect_eq((r.status, r.body), (206, data[:10]))
    r = SRV.get("/" + p, {"Range": "bytes=0-9", "If-Range": '"stale"'})
    expect_eq((r.status, len(r.body)), (200, n))
    # a range on a big file, from the middle, is byte-exact
    big = lib("misc/big.ts")
    r = SRV.get("/misc/big.ts", {"Range": "bytes=1000000-9000000"})
    expect_eq(sha256(r.body), sha256(big[1000000:9000001]), "big range")


def test_conditionals():
    p = "/360p/seg_00002.ts"
    r = SRV.get(p)
    etag, lm = r.h("etag"), r.h("last-modified")
    expect(etag and lm, "validators present")
    r = SRV.get(p, {"If-None-Match": etag})
    expect_eq((r.status, r.body), (304, b""))
    expect_eq(r.h("etag"), etag)
    r = SRV.get(p, {"If-None-Match": '"other", ' + etag})
    expect_eq(r.status, 304, "etag list")
    r = SRV.get(p, {"If-None-Match": "W/" + etag})
    expect_eq(r.status, 304, "weak comparison")
    r = SRV.get(p, {"If-None-Match": "*"})
    expect_eq(r.status, 304, "star")
    r = SRV.get(p, {"If-None-Match": '"nope"'})
    expect_eq(r.status, 200)
    r = SRV.get(p, {"If-Modified-Since": lm})
    expect_eq(r.status, 304, "IMS equal")
    r = SRV.get(p, {"If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"})
    expect_eq(r.status, 200, "IMS older")
    r = SRV.get(p, {"If-Modified-Since": "garbage"})
    expect_eq(r.status, 200, "IMS garbage ignored")
    r = SRV.get(p, {"If-None-Match": '"nope"', "If-Modified-Since": lm})
    expect_eq(r.status, 200, "INM takes precedence over IMS")
    r = SRV.get(p, {"If-Match": '"nope"'})
    expect_eq(r.status, 412, "If-Match mismatch")
    r = SRV.get(p, {"If-Match": etag})
    expect_eq(r.status, 200, "If-Match match")
    r = SRV.get("/master.m3u8", {"If-None-Match": SRV.get("/master.m3u8").h("etag")})
    expect_eq(r.status, 304, "playlist 304")


def test_not_found_and_dirs():
    expect_eq(SRV.get("/nope.ts").status, 404)
    expect_eq(SRV.get("/").status, 404)
    expect_eq(SRV.get("/adir").status, 404)
    expect_eq(SRV.get("/adir/").status, 404)
    expect_eq(SRV.get("/288p/seg_00000.ts/x").status, 404)
    r = SRV.get("/misc/with%20space.ts")
    expect_eq((r.status, r.body), (200, lib("misc/with space.ts")))
    r = SRV.get("/inside.ts")
    expect_eq((r.status, r.body), (200, lib("360p/seg_00000.ts")), "symlink inside root")
    r = SRV.get("/misc/empty.ts")
    expect_eq((r.status, r.body, r.h("content-length")), (200, b"", "0"))
    r = SRV.get("/288p/index.m3u8?token=abc&x=1")
    expect_eq((r.status, r.body), (200, lib("288p/index.m3u8")), "query ignored")


def test_file_replaced_is_noticed():
    p = os.path.join(ROOT, "misc", "live.m3u8")
    with open(p, "w") as f:
        f.write("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:1\n")
    expect_eq(SRV.get("/misc/live.m3u8").body, b"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:1\n")
    tmp = p + ".tmp"
    with open(tmp, "w") as f:
        f.write("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:2\n")
    os.rename(tmp, p)
    import time
    time.sleep(1.2)  # fd_cache.valid is 1s in this config
    expect_eq(SRV.get("/misc/live.m3u8").body, b"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:2\n")


def test_ipv6_listener():
    import socket
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
    except OSError:
        print("  (no IPv6 loopback here; skipped)")
        return
    from he import free_port
    port6 = free_port(socket.AF_INET6, "::1")
    port4 = free_port()
    srv = Server(ROOT, listen=["[::1]:%d" % port6, "127.0.0.1:%d" % port4], workers=2)
    with srv:
        c = Conn(port6, host="::1", family=socket.AF_INET6)
        expect_eq(c.request("GET", "/master.m3u8").body, lib("master.m3u8"))
        c.close()
        c = Conn(port4)
        expect_eq(c.request("GET", "/master.m3u8").body, lib("master.m3u8"))
        c.close()


def main():
    srv = Server(ROOT, extra=EXTRA + "fd_cache:\n  valid: 1s\n", workers=2)
    rc, log = run_with_server(globals(), TMP, srv)
    if "kernel features" not in log:
        print("server log lacks the feature line")
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
