"""Bad input gets a clear answer, never a crash, a leak or a byte from
outside root; each case is followed by a successful request."""

import os
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, connect, expect, expect_eq, half_close, make_library, run_with_server  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-bad-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
SRV = None
SECRET = b"outside root"


def ok_after():
    r = SRV.get("/master.m3u8")
    expect_eq(r.status, 200, "request after bad input")


def raw(data, wait_close=True):
    c = SRV.conn()
    c.send(data)
    r = c.read_response()
    if wait_close:
        expect(c.closed_by_peer(), "connection closed after %r" % data[:40])
    c.close()
    return r


def test_malformed_requests_400():
    cases = [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /a b HTTP/1.1\r\n\r\n",
        b"GET /x HTTP/1.1\r\nNoColonHere\r\n\r\n",
        b"GET /x HTTP/1.1\r\nBad Header: 1\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a\x00b\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40,
        b"GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"GET /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
    ]
    for data in cases:
        r = raw(data)
        expect_eq(r.status, 400, repr(data[:30]))
        ok_after()


def test_request_line_too_long_414():
    r = raw(("GET /" + "a" * 2000 + " HTTP/1.1\r\nHost: x\r\n\r\n").encode())
    expect_eq(r.status, 414)
    ok_after()


def test_headers_too_large_431():
    hdrs = "".join("X-Filler-%d: %s\r\n" % (i, "v" * 100) for i in range(60))
    r = raw(("GET /master.m3u8 HTTP/1.1\r\nHost: x\r\n" + hdrs + "\r\n").encode())
    expect_eq(r.status, 431)
    r = raw(("GET /master.m3u8 HTTP/1.1\r\nX-Big: " + "v" * 5000 + "\r\n\r\n").encode())
    expect_eq(r.status, 431)
    ok_after()


TRAVERSALS = [
    "/../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E/secret.txt", "/.%2e/secret.txt", "/%2e./secret.txt",
    "/360p/../../secret.txt", "/360p/%2e%2e/%2e%2e/secret.txt", "/..%2fsecret.txt", "/360p%2f..%2f..%2fsecret.txt",
    "/%2f%2e%2e%2fsecret.txt", "/360p/..\\..\\secret.txt", "/360p/%5c..%5csecret.txt", "/%00/secret.txt",
    "/master.m3u8%00.ts", "/..", "/360p/..", "/./../secret.txt", "/%252e%252e/secret.txt",
    "/360p/./../../../../../../etc/passwd", "/%c0%ae%c0%ae/secret.txt", "//etc/passwd", "/etc/passwd",
]


def test_path_traversal_never_escapes():
    for t in TRAVERSALS:
        c = SRV.conn()
        c.send(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % t).encode("latin1"))
        r = c.read_response()
        c.close()
        expect(r.status in (400, 404), "%s answered %d" % (t, r.status))
        expect(SECRET not in r.body and b"root:" not in r.body, "%s leaked bytes" % t)
        ok_after()
    # a NUL byte on the wire in the target
    r = raw(b"GET /master.m3u8\x00.ts HTTP/1.1\r\n\r\n")
    expect_eq(r.status, 400)
    ok_after()


def test_symlink_out_of_root_refused():
    for p in ("/escape.ts", "/misc/escape-dir/passwd", "/misc/escape-dir/hostname"):
        r = SRV.get(p)
        expect(r.status in (403, 404), "%s answered %d" % (p, r.status))
        expect(SECRET not in r.body and b"root:" not in r.body, "%s leaked" % p)
        ok_after()
    expect_eq(SRV.get("/escape.ts").status, 403, "symlink escape is refused")


def test_half_close_and_resets():
    # a client that sends a request and half-closes still gets its answer
    c = SRV.conn()
    c.send(b"GET /master.m3u8 HTTP/1.1\r\nHost: x\r\n\r\n")
    half_close(c.sock)
    r = c.read_response()
    expect_eq(r.status, 200)
    c.close()
    # a client that resets mid-response does not hurt the server
    for _ in range(20):
        s = connect(SRV.port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.sendall(b"GET /misc/big.ts HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(100)
        s.close()
    ok_after()


def test_garbage_flood():
    import random
    rnd = random.Random(7)
    for i in range(200):
        c = SRV.conn(timeout=5)
        try:
            c.send(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 600))) + b"\r\n\r\n")
            c.closed_by_peer(2)
        except OSError:
            pass
        c.close()
    ok_after()


def main():
    extra = "limits:\n  header_bytes: 4096\n  uri_bytes: 1024\n"
    return run_with_server(globals(), TMP, Server(ROOT, extra=extra, workers=2))[0]


if __name__ == "__main__":
    sys.exit(main())
