"""Request framing and smuggling through the real binary: a table of raw
requests whose framing is ambiguous or malformed. Each must be answered
400 and the connection closed, and nothing hidden after or inside it (a
second request in a body, behind a bad chunk, after an obs-fold) may be
read as a request: exactly one response comes back. Every wait is
bounded."""

import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, make_library, run_main  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-smuggle-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)

# A request smuggled behind the framing: if it is ever read as a request,
# a second response (200 for the playlist) comes back.
SMUGGLED = b"GET /master.m3u8 HTTP/1.1\r\nHost: t\r\n\r\n"
H = b"Host: t\r\n"

CASES = [
    ("Content-Length with Transfer-Encoding",
     b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("Transfer-Encoding with Content-Length",
     b"GET / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("two different Content-Lengths",
     b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 0\r\nContent-Length: 41\r\n\r\n" + SMUGGLED),
    ("one Content-Length with two values",
     b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 0, 41\r\n\r\n" + SMUGGLED),
    ("Transfer-Encoding on a GET",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("Transfer-Encoding on a HEAD",
     b"HEAD /master.m3u8 HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("Transfer-Encoding not chunked last",
     b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("Transfer-Encoding with a space before the colon",
     b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("obs-fold in a header",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"X-A: a\r\n b\r\n\r\n" + SMUGGLED),
    ("obs-fold of Transfer-Encoding",
     b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("NUL in a header value",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n" + SMUGGLED),
    ("NUL in the target",
     b"GET /master\x00.m3u8 HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED),
    ("bare CR in a header value",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n" + SMUGGLED),
    ("bare CR ending a header line",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"X-A: a\rX-B: b\r\n\r\n" + SMUGGLED),
    ("bare LF ending a header line",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"X-A: a\nX-B: b\r\n\r\n" + SMUGGLED),
    ("bare LF ending the request line",
     b"GET /master.m3u8 HTTP/1.1\n" + H + b"\r\n" + SMUGGLED),
    ("bare LF ending the head",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"\n" + SMUGGLED),
    ("chunk size not hex",
     b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + SMUGGLED),
    ("chunk size not hex, on a GET",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + SMUGGLED),
    ("chunk size not hex, on OPTIONS",
     b"OPTIONS /master.m3u8 HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n-1\r\n" + SMUGGLED),
    ("chunk size overflowing 64 bits",
     b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\n" + SMUGGLED),
    ("chunk size with a space before the CRLF",
     b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n0 \r\n\r\n" + SMUGGLED),
    ("chunk data longer than its size",
     b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n0\r\n\r\n" + SMUGGLED),
    ("chunk size with a 0x prefix",
     b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    ("Content-Length not a number",
     b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 4x\r\n\r\n" + SMUGGLED),
    ("Content-Length negative",
     b"POST / HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n" + SMUGGLED),
    ("a space inside a header name",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"X A: b\r\n\r\n" + SMUGGLED),
    ("a space before the colon",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"Content-Length : 41\r\n\r\n" + SMUGGLED),
    ("a header line starting with a space (first)",
     b"GET /master.m3u8 HTTP/1.1\r\n Host: t\r\n\r\n" + SMUGGLED),
    ("two Host lines",
     b"GET /master.m3u8 HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n" + SMUGGLED),
    ("two Host lines, same value",
     b"GET /master.m3u8 HTTP/1.1\r\nHost: t\r\nHost: t\r\n\r\n" + SMUGGLED),
    ("no Host in HTTP/1.1",
     b"GET /master.m3u8 HTTP/1.1\r\nX-A: b\r\n\r\n" + SMUGGLED),
    ("a header without a colon",
     b"GET /master.m3u8 HTTP/1.1\r\n" + H + b"X-A b\r\n\r\n" + SMUGGLED),
    ("HTTP/1.2 and a version past it",
     b"GET /master.m3u8 HTTP/1.13\r\n" + H + b"\r\n" + SMUGGLED),
]


def exchange(port, raw, wait=5.0):
    """Sends raw, reads until the server closes (or wait runs out):
    (bytes, closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    got, closed = b"", False
    try:
        s.sendall(raw)
        deadline = time.time() + wait
        while time.time() < deadline:
            s.settimeout(max(0.05, deadline - time.time()))
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True  # a reset is a close, but the answer must be in before it
                break
            if not d:
                closed = True
                break
            got += d
    finally:
        s.close()
    return got, closed


def test_ambiguous_framing_is_400_and_closes():
    with Server(ROOT) as srv:
        failures = []
        for name, raw in CASES:
            got, closed = exchange(srv.port, raw)
            statuses = [line.split(b" ")[1] for line in got.split(b"\r\n") if line.startswith(b"HTTP/1.")]
            ok = statuses == [b"400"] and closed and b"connection: close" in got.lower()
            if not ok:
                failures.append("%s: statuses %r, closed %s: %r" % (name, statuses, closed, got[:200]))
        expect(not failures, "\n  " + "\n  ".join(failures))
        # and the server is fine afterwards
        r = srv.get("/master.m3u8")
        expect_eq(r.status, 200, "a plain request afterwards")


def test_well_framed_bodies_are_not_400():
    """The table's rules are not a blanket refusal: a POST with a valid
    Content-Length or chunked body is 405 (no method here takes a body),
    still closed, and the bytes behind its body are never a request."""
    with Server(ROOT) as srv:
        for name, raw in (
            ("POST with Content-Length", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nhello" + SMUGGLED),
            ("POST chunked", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" +
             SMUGGLED),
        ):
            got, closed = exchange(srv.port, raw)
            statuses = [line.split(b" ")[1] for line in got.split(b"\r\n") if line.startswith(b"HTTP/1.")]
            expect_eq(statuses, [b"405"], name)
            expect(closed, "%s: closed" % name)


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, sys.argv[1:]))
