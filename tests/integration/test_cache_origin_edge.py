"""The edge cache against origins that test its edges, through the real
binary. A raw-socket origin (he_rawo.py) answers each request-target with
bytes written by the test, so it can send what origin.py never would:

  - a file named "x.ts?lang=en" (requested as /x.ts%3Flang=en) and the
    query /x.ts?lang=en are two objects, and a 404 of one is not served
    for the other;
  - key parameter values "a+b" and "a%2Bb" are two objects;
  - a Transfer-Encoding or Cache-Control line longer than the parser's line
    buffer is a protocol error (502, nothing cached), never skipped; a
    Cache-Control split over two lines is read whole (private wins);
  - a 404 with no-cache is not negative-cached, one with max-age=1 lives
    1 s, not cache.negative_ttl, and a cached 404 counts once in
    negative_hits;
  - a live playlist revalidated with 304 max-age=30 is still capped at
    half its target duration;
  - a gzip body (Content-Encoding: gzip) is served with its
    Content-Encoding and Vary: Accept-Encoding, from RAM, from the SSD tier
    after a restart, streamed or whole; a gzip playlist does not disturb
    prefetch.

Every wait is bounded."""

import gzip
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, run_main  # noqa: E402
from he_admin import stats  # noqa: E402
from he_rawo import RawOrigin, cache_conf, response  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-cache-edge-")
ROOT = os.path.join(TMP, "lib")  # empty: everything comes from the origin
os.makedirs(ROOT, exist_ok=True)


def server(origin, ssd=None, prefetch=0, extra="", admin=False):
    return Server(ROOT, extra=cache_conf(origin, ssd, prefetch, extra, total_timeout="10s"), admin=admin)


def get(srv, target, headers=None, method="GET"):
    c = srv.conn()
    try:
        return c.request(method, target, headers)
    finally:
        c.close()


# ---------------------------------------------------------------- keys


def test_key_escaped_question_mark():
    """/k/x.ts%3Flang=en names a file "x.ts?lang=en"; it used to share the
    key "k/x.ts?lang=en" with the query /k/x.ts?lang=en, so its cached 404
    was served for the real segment."""
    esc, real = "/k/x.ts%3Flang=en", "/k/x.ts?lang=en"
    routes = {
        esc: lambda r: response(404, b"no such file\n"),
        real: lambda r: response(200, b"real segment", [("Cache-Control", "max-age=60")]),
    }
    with RawOrigin(routes) as o, server(o, extra="  key_params: [lang]\n") as srv:
        expect_eq(get(srv, esc).status, 404, "the file's 404")
        r = get(srv, real)
        expect_eq((r.status, r.body), (200, b"real segment"), "the query's object")
        expect_eq(o.count(real), 1, "origin requests for the query")
        # both cached now, each under its own key
        expect_eq(get(srv, esc).status, 404, "the file's 404 again")
        expect_eq(get(srv, real).body, b"real segment", "the query's object again")
        expect_eq((o.count(esc), o.count(real)), (1, 1), "origin requests")


def test_key_plus_and_escaped_plus():
    """An origin that reads queries as forms sees "a b" and "a+b": two
    objects, not one key."""
    plus, esc = "/p/a.ts?lang=a+b", "/p/a.ts?lang=a%2Bb"
    routes = {
        plus: lambda r: response(200, b"space", [("Cache-Control", "max-age=60")]),
        esc: lambda r: response(200, b"plus", [("Cache-Control", "max-age=60")]),
    }
    with RawOrigin(routes) as o, server(o, extra="  key_params: [lang]\n") as srv:
        expect_eq(get(srv, plus).body, b"space", "a+b")
        expect_eq(get(srv, esc).body, b"plus", "a%2Bb")
        expect_eq(get(srv, "/p/a.ts?lang=a%2bb&x=1").body, b"plus", "a%2bb (a hit)")
        expect_eq((o.count(plus), o.count(esc)), (1, 1), "origin requests")


# ---------------------------------------------------------------- long header lines


def test_long_transfer_encoding_line():
    """Transfer-Encoding padded past the line buffer: skipping it read the
    chunk framing as the body and cached it."""
    t = "/h/te.ts"
    te = "Transfer-Encoding:" + " " * 1100 + "chunked"
    raw = ("HTTP/1.1 200 OK\r\n%s\r\nCache-Control: max-age=60\r\nConnection: close\r\n\r\n" % te).encode()
    raw += b"5\r\nhello\r\n0\r\n\r\n"
    with RawOrigin({t: lambda r: raw}) as o, server(o) as srv:
        r = get(srv, t)
        expect_eq(r.status, 502, "a framing header we cannot read whole")
        expect(b"hello" not in r.body, "chunk framing served as the body: %r" % r.body[:64])
        get(srv, t)
        expect_eq(o.count(t), 2, "origin requests (nothing cached)")


def test_long_cache_control_line():
    """A Cache-Control line over 1100 bytes ending in private was skipped,
    so the private response was cached."""
    t = "/h/cc.ts"
    cc = "max-age=60, " + "x-pad=1, " * 120 + "private"
    with RawOrigin({t: lambda r: response(200, b"secret", [("Cache-Control", cc)])}) as o, server(o) as srv:
        expect_eq(get(srv, t).status, 502, "an over-long Cache-Control")
        get(srv, t)
        expect_eq(o.count(t), 2, "origin requests (nothing cached)")


def test_cache_control_over_two_lines():
    """A 262-byte Cache-Control and a second line with private: the
    combined string was cut at 255 bytes and private lost."""
    t = "/h/cc2.ts"
    first = "max-age=60, " + ", ".join("x-e%03d" % i for i in range(36))
    expect(len(first) > 255, "the first line is long enough")
    hdrs = [("Cache-Control", first), ("Cache-Control", "private")]
    with RawOrigin({t: lambda r: response(200, b"secret", hdrs)}) as o, server(o) as srv:
        r = get(srv, t)
        expect_eq((r.status, r.body), (200, b"secret"), "the response itself")
        get(srv, t)
        expect_eq(o.count(t), 2, "origin requests (private: not cached)")


# ---------------------------------------------------------------- negative caching


def test_404_no_cache_not_stored():
    """A live segment not produced yet: the origin says 404 no-cache, and
    the next request must ask again, not get the 404 for negative_ttl."""
    t, t1 = "/n/seg_9.ts", "/n/seg_10.ts"
    routes = {
        t: lambda r: response(404, b"not yet\n", [("Cache-Control", "no-cache")]),
        t1: lambda r: response(404, b"not yet\n", [("Cache-Control", "max-age=1")]),
    }
    with RawOrigin(routes) as o, server(o, extra="  negative_ttl: 30s\n", admin=True) as srv:
        expect_eq(get(srv, t).status, 404, "first 404")
        expect_eq(get(srv, t).status, 404, "second 404")
        expect_eq(o.count(t), 2, "origin requests for a no-cache 404")
        expect_eq(get(srv, t1).status, 404, "max-age=1 404")
        expect_eq(get(srv, t1).status, 404, "max-age=1 404, cached")
        expect_eq(o.count(t1), 1, "origin requests within max-age")
        # one cached 404 went out (the max-age=1 one, asked again); the
        # other three were fills. It used to count twice: at the tier's
        # lookup and again at the serve.
        expect_eq(stats(srv)["cache"]["negative_hits"], 1, "negative_hits")
        time.sleep(1.3)
        expect_eq(get(srv, t1).status, 404, "max-age=1 404, expired")
        expect_eq(o.count(t1), 2, "origin requests after max-age (not negative_ttl)")


# ---------------------------------------------------------------- live playlist, 304


def live_playlist(first):
    s = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:%d\n" % first
    for i in range(first, first + 3):
        s += "#EXTINF:2.0,\nseg_%d.ts\n" % i
    return s.encode()


def test_live_playlist_304_keeps_live_cap():
    """Revalidated with 304 max-age=30, a live playlist (target duration 2)
    was then served for 30 s; it must stay capped at 1 s."""
    t = "/live/a/index.m3u8"
    state = {"seq": 1}

    def playlist(req):
        etag = '"v%d"' % state["seq"]
        if req[2].get("if-none-match") == etag:
            return response(304, headers=[("ETag", etag), ("Cache-Control", "max-age=30")])
        return response(200, live_playlist(state["seq"]),
                        [("ETag", etag), ("Cache-Control", "max-age=30"),
                         ("Content-Type", "application/vnd.apple.mpegurl")])

    with RawOrigin({t: playlist}) as o, server(o) as srv:
        r = get(srv, t)
        expect(b"MEDIA-SEQUENCE:1" in r.body, "first copy")
        time.sleep(1.2)  # past the live cap (1 s): revalidated, 304
        r = get(srv, t)
        expect(b"MEDIA-SEQUENCE:1" in r.body, "304: the same copy")
        expect_eq(o.count(t), 2, "origin requests after the cap")
        expect_eq(o.last(t)[2].get("if-none-match"), '"v1"', "a conditional request")
        state["seq"] = 2  # the stream moves on
        time.sleep(1.2)
        r = get(srv, t)
        expect_eq(o.count(t), 3, "origin requests: the 304's max-age=30 must not freeze it")
        expect(b"MEDIA-SEQUENCE:2" in r.body, "the new playlist: %r" % r.body[:80])


# ---------------------------------------------------------------- Content-Encoding


def test_gzip_body_keeps_content_encoding():
    """Stores like S3 return the stored encoding whatever Accept-Encoding
    says: the bytes must go out with their Content-Encoding."""
    plain = b"segment bytes " * 500
    gz = gzip.compress(plain)
    routes = {
        "/z/a.ts": lambda r: response(200, gz, [("Content-Encoding", "gzip"), ("Cache-Control", "max-age=60")]),
        "/z/b.ts": lambda r: response(200, gz, [("Content-Encoding", "gzip"), ("Cache-Control", "max-age=60")],
                                      chunked=True),
        "/z/id.ts": lambda r: response(200, plain, [("Content-Encoding", "identity"),
                                                    ("Cache-Control", "max-age=60")]),
    }
    ssd = os.path.join(TMP, "ssd-gzip")
    with RawOrigin(routes) as o:
        with server(o, ssd=ssd) as srv:
            for t in ("/z/a.ts", "/z/b.ts"):
                for what in ("fill", "RAM hit"):
                    r = get(srv, t)
                    expect_eq(r.status, 200, "%s %s" % (t, what))
                    expect_eq(r.h("content-encoding"), "gzip", "%s %s: Content-Encoding" % (t, what))
                    expect_eq(r.h("vary"), "Accept-Encoding", "%s %s: Vary" % (t, what))
                    expect_eq(gzip.decompress(r.body), plain, "%s %s: body" % (t, what))
                expect_eq(o.count(t), 1, "origin requests for " + t)
            expect_eq(o.last("/z/a.ts")[2].get("accept-encoding"), "identity", "what we asked for")
            r = get(srv, "/z/id.ts")
            expect_eq((r.body, r.h("content-encoding"), r.h("vary")), (plain, None, None), "identity")
            r = get(srv, "/z/a.ts", method="HEAD")
            expect_eq(r.h("content-encoding"), "gzip", "HEAD: Content-Encoding")
            r = get(srv, "/z/a.ts", headers={"Range": "bytes=0-9"})
            expect_eq((r.status, r.body, r.h("content-encoding")), (206, gz[:10], "gzip"), "a range")
            deadline = time.time() + 10  # the SSD writes
            while time.time() < deadline and sum(
                    f.endswith(".obj") for _, _, fs in os.walk(ssd) for f in fs) < 3:
                time.sleep(0.05)
        with server(o, ssd=ssd) as srv:  # a restart: from the SSD tier
            r = get(srv, "/z/a.ts")
            expect_eq(o.count("/z/a.ts"), 1, "origin requests after the restart")
            expect_eq(r.h("content-encoding"), "gzip", "SSD hit: Content-Encoding")
            expect_eq(gzip.decompress(r.body), plain, "SSD hit: body")


def test_gzip_playlist_and_prefetch():
    """A gzip media playlist: served with its encoding; prefetch does not
    read it as a playlist (it learns nothing, and nothing breaks)."""
    pl = b"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
    pl += b"".join(b"#EXTINF:2.0,\nseg_%d.ts\n" % i for i in range(5)) + b"#EXT-X-ENDLIST\n"
    gz = gzip.compress(pl)
    routes = {"/g/index.m3u8": lambda r: response(200, gz, [("Content-Encoding", "gzip"),
                                                             ("Cache-Control", "max-age=60")])}
    for i in range(5):
        routes["/g/seg_%d.ts" % i] = lambda r, i=i: response(200, b"seg %d" % i, [("Cache-Control", "max-age=60")])
    with RawOrigin(routes) as o, server(o, prefetch=2) as srv:
        for _ in range(2):
            r = get(srv, "/g/index.m3u8")
            expect_eq(r.h("content-encoding"), "gzip", "playlist Content-Encoding")
            expect_eq(gzip.decompress(r.body), pl, "playlist body")
        expect_eq(get(srv, "/g/seg_0.ts").body, b"seg 0", "a segment")
        time.sleep(0.3)
        expect_eq(o.count("/g/seg_1.ts"), 0, "nothing prefetched from gzip bytes")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
