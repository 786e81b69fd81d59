"""A connection's life at its edges, through the real binary: requests sent
before a half-close are all answered; a timeout shortened by a live reload
applies to connections that set their timer afterwards, and to those
waiting, from the reload. Every wait is bounded."""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, half_close, make_library, run_main, sha256  # noqa: E402
from he_admin import reload_and_wait  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-lifecycle-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=32)


def lib(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def get_line(path):
    return ("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode()


def test_half_close_answers_every_buffered_request():
    with Server(ROOT) as srv:
        # The first response is long enough to be under way when the EOF
        # arrives; the two complete requests behind it are still answered,
        # the incomplete third is dropped, then the server closes.
        c = srv.conn()
        c.send(get_line("/misc/big.ts") + get_line("/master.m3u8") + get_line("/360p/index.m3u8") +
               b"GET /288p/index.m3u8 HTTP/1.1\r\nHo")
        half_close(c.sock)
        r = c.read_response()
        expect_eq(r.status, 200, "big.ts")
        expect_eq(sha256(r.body), sha256(lib("misc/big.ts")), "big.ts body")
        for p in ("/master.m3u8", "/360p/index.m3u8"):
            r = c.read_response()
            expect_eq((r.status, r.body), (200, lib(p[1:])), p)
        expect(c.closed_by_peer(5), "closed after the last complete request")
        expect_eq(c.buf, b"", "nothing answered for the incomplete request")
        c.close()
        # many small ones, all answered
        paths = ["/master.m3u8", "/288p/index.m3u8", "/misc/aes.key", "/nope.ts"] * 10
        c = srv.conn()
        c.send(b"".join(get_line(p) for p in paths))
        half_close(c.sock)
        for p in paths:
            r = c.read_response()
            expect_eq(r.status, 404 if p == "/nope.ts" else 200, p)
        expect(c.closed_by_peer(5), "closed after the pipeline")
        c.close()
        expect_eq(srv.get("/master.m3u8").status, 200)


def test_shortened_keepalive_applies_after_reload():
    with Server(ROOT, admin=True, extra="timeouts:\n  keepalive: 20s\n") as srv:
        a = srv.conn()
        expect_eq(a.request("GET", "/master.m3u8").status, 200)
        with open(srv.conf) as f:
            text = f.read()
        with open(srv.conf, "w") as f:
            f.write(text.replace("keepalive: 20s", "keepalive: 1s"))
        reload_and_wait(srv, 2)
        t_reload = time.time()
        b = srv.conn()
        expect_eq(b.request("GET", "/master.m3u8").status, 200)
        t0 = time.time()
        expect(b.closed_by_peer(6), "a connection idle after the reload is closed")
        expect(time.time() - t0 < 3, "within about the new keep-alive timeout (%.1fs)" % (time.time() - t0))
        # the one idle across the reload waits no longer than the new value
        # counted from the reload
        expect(a.closed_by_peer(3), "the connection idle across the reload is closed too")
        expect(time.time() - t_reload < 4, "soon after the reload")
        a.close()
        b.close()


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, sys.argv[1:]))
