"""Self-test of origin.py, the scriptable test origin: content, keep-alive,
per-path counts (Python API and /_stats), 304 on validators, HEAD, delay,
throttle, 500, reset, cut midway, down and back up, /_control, and the
live playlist advancing. Fast and bounded (no hlsedge needed)."""

import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import expect, expect_eq, run_tests  # noqa: E402
from origin import Origin, segment_bytes  # noqa: E402

DATA = bytes(range(256)) * 400  # 102400 bytes


def conn(o, timeout=5):
    return http.client.HTTPConnection("127.0.0.1", o.port, timeout=timeout)


def get(c, path, headers=None, method="GET"):
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    return r, r.read()


def test_content_keepalive_counts():
    with Origin(files={"/a/seg.ts": DATA, "/a/index.m3u8": b"#EXTM3U\n"}) as o:
        c = conn(o)
        r, body = get(c, "/a/seg.ts")
        expect_eq(r.status, 200, "status")
        expect_eq(body, DATA, "body")
        expect_eq(r.getheader("Content-Type"), "video/mp2t", "type")
        expect_eq(r.getheader("Cache-Control"), "max-age=3600", "cc")
        sock = c.sock
        r, body = get(c, "/a/seg.ts?x=1")
        expect(c.sock is sock, "keep-alive: same connection")
        r, _ = get(c, "/a/index.m3u8")
        expect_eq(r.getheader("Cache-Control"), "max-age=1", "playlist cc")
        r, _ = get(c, "/missing.ts")
        expect_eq(r.status, 404, "missing")
        expect_eq(o.count("/a/seg.ts"), 2, "count by path, query ignored")
        expect_eq(o.total(), 4, "total")
        r, body = get(c, "/_stats")
        st = json.loads(body)
        expect_eq(st["requests"]["/a/seg.ts"], 2, "/_stats")
        expect_eq(st["total"], 4, "/_stats is not counted")
        o.reset_stats()
        expect_eq(o.total(), 0, "reset")
        c.close()


def test_validators_and_head():
    with Origin(files={"/v.ts": DATA}) as o:
        c = conn(o)
        r, _ = get(c, "/v.ts")
        etag, lm = r.getheader("ETag"), r.getheader("Last-Modified")
        expect(etag and lm, "validators present")
        r, body = get(c, "/v.ts", {"If-None-Match": etag})
        expect_eq((r.status, body), (304, b""), "304 on ETag")
        r, body = get(c, "/v.ts", {"If-Modified-Since": lm})
        expect_eq(r.status, 304, "304 on date")
        r, body = get(c, "/v.ts", {"If-None-Match": '"other"'})
        expect_eq(r.status, 200, "200 on another ETag")
        r, body = get(c, "/v.ts", method="HEAD")
        expect_eq((r.status, body, r.getheader("Content-Length")), (200, b"", str(len(DATA))), "HEAD")
        o.behave("/v.ts", cache_control="no-store", etag='"fixed"', expires="Thu, 01 Jan 1970 00:00:00 GMT")
        r, _ = get(c, "/v.ts")
        expect_eq((r.getheader("Cache-Control"), r.getheader("ETag")), ("no-store", '"fixed"'), "overrides")
        expect(r.getheader("Expires").startswith("Thu, 01 Jan 1970"), "Expires")
        o.behave("/v.ts", etag="")
        r, _ = get(c, "/v.ts")
        expect(r.getheader("ETag") is None, "header dropped")
        c.close()


def test_slow_and_failures():
    with Origin(files={"/s.ts": DATA, "/t.ts": DATA[:20000]}) as o:
        o.behave("/s.ts", delay=0.3)
        t0 = time.time()
        r, body = get(conn(o), "/s.ts")
        expect(time.time() - t0 >= 0.3 and body == DATA, "delay")
        o.behave("/t.ts", rate=40000)
        t0 = time.time()
        r, body = get(conn(o), "/t.ts")
        dt = time.time() - t0
        expect(0.35 <= dt < 3 and body == DATA[:20000], "throttled: %.2fs" % dt)
        o.clear()
        o.behave("/s.ts", fail=1)
        r, _ = get(conn(o), "/s.ts")
        expect_eq(r.status, 500, "fail")
        o.behave("/s.ts", fail=0, status=503)
        r, _ = get(conn(o), "/s.ts")
        expect_eq(r.status, 503, "status")
        o.clear()
        o.behave("/s.ts", reset=1)
        try:
            get(conn(o), "/s.ts")
            raise AssertionError("no reset")
        except (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError):
            pass
        o.clear()
        o.behave("/s.ts", cut=1000)
        c = conn(o)
        c.request("GET", "/s.ts")
        r = c.getresponse()
        expect_eq(r.getheader("Content-Length"), str(len(DATA)), "full length announced")
        try:
            r.read()
            raise AssertionError("no cut")
        except http.client.IncompleteRead as e:
            expect_eq(len(e.partial), 1000, "bytes before the cut")
        expect_eq(o.count("/s.ts"), 5, "every attempt counted")


def test_down_and_up():
    with Origin(files={"/d.ts": b"x"}) as o:
        c = conn(o)
        get(c, "/d.ts")
        port = o.port
        o.down()
        expect(not o.is_up(), "down")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            raise AssertionError("still listening")
        except ConnectionRefusedError:
            pass
        try:  # the kept-alive connection died with it
            get(c, "/d.ts")
            raise AssertionError("kept-alive connection survived")
        except (ConnectionError, http.client.HTTPException, OSError):
            pass
        o.up()
        expect_eq(o.port, port, "same port")
        r, body = get(conn(o), "/d.ts")
        expect_eq(body, b"x", "back up")
        # through /_control: down for 0.5 s, then back by itself
        r, body = get(conn(o), "/_control?down=0.5")
        expect(json.loads(body)["ok"], "control answered")
        time.sleep(0.25)
        expect(not o.is_up(), "down by control")
        deadline = time.time() + 5
        while not o.is_up() and time.time() < deadline:
            time.sleep(0.05)
        r, body = get(conn(o), "/d.ts")
        expect_eq(body, b"x", "back by itself")


def test_control():
    with Origin(files={"/c.ts": DATA}) as o:
        c = conn(o)
        r, body = get(c, "/_control?path=/c.ts&cut=10&cache_control=max-age%3D5")
        expect_eq(o._behaviour("/c.ts"), {"cut": 10, "cache_control": "max-age=5"}, "set by HTTP")
        r, body = get(c, "/_control?bogus=1")
        expect("error" in json.loads(body), "unknown key refused")
        get(c, "/_control?clear=1")
        expect_eq(o._behaviour("/c.ts"), {}, "cleared")
        get(c, "/c.ts")
        get(c, "/_control?reset_stats=1")
        expect_eq(o.total(), 0, "stats reset by HTTP")


def test_live_playlist():
    with Origin() as o:
        lv = o.live("/live/720p", period=0.5, window=4, seg_size=1000)
        c = conn(o)
        r, pl = get(c, "/live/720p/index.m3u8")
        expect_eq(r.getheader("Content-Type"), "application/vnd.apple.mpegurl", "type")
        text = pl.decode()
        expect("#EXT-X-TARGETDURATION:2" in text, text)
        seq0 = int(text.split("#EXT-X-MEDIA-SEQUENCE:")[1].split()[0])
        segs = [l for l in text.splitlines() if l.startswith("seg_")]
        expect_eq(len(segs), 4, "window")
        r, body = get(c, "/live/720p/" + segs[-1])
        expect_eq(body, segment_bytes("/live/720p/" + segs[-1], 1000), "newest segment")
        r, _ = get(c, "/live/720p/seg_%d.ts" % (seq0 + 10))
        expect_eq(r.status, 404, "future segment")
        time.sleep(0.6)
        r, pl2 = get(c, "/live/720p/index.m3u8")
        seq1 = int(pl2.decode().split("#EXT-X-MEDIA-SEQUENCE:")[1].split()[0])
        expect(seq1 > seq0, "sequence advanced")
        expect(pl2 != pl, "playlist changed")
        # the default is the stream of the tests: one new segment every 2 s
        lv2 = o.live("/live/def")
        expect_eq((lv2.period, lv2.target), (2.0, 2), "defaults")
        expect(lv.seq() >= seq1, "seq")


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
