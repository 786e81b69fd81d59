"""Connection handling through the real binary: header, keep-alive and send
timeouts, the connection limit, 1,000 concurrent keep-alive clients, and
the SIGTERM drain. Every wait is bounded."""

import os
import selectors
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, TLS, connect, expect, expect_eq, make_library, recv_nb, run_main, sha256  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-conns-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=32)


def lib(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


TIMEOUTS = "timeouts:\n  header: 1s\n  keepalive: 1s\n  send: 1s\n"


def test_header_timeout_closes():
    with Server(ROOT, extra=TIMEOUTS) as srv:
        idle = srv.conn()  # sends nothing at all
        partial = srv.conn()
        partial.send(b"GET /master.m3u8 HTTP/1.1\r\nHost: x\r\n")  # never finishes
        t0 = time.time()
        expect(idle.closed_by_peer(5), "silent client closed")
        expect(partial.closed_by_peer(5), "partial header closed")
        expect(time.time() - t0 < 4, "closed within the header timeout")
        # trickling bytes does not extend the header timeout
        trickle = srv.conn()
        t0 = time.time()
        closed = False
        for ch in b"GET /master.m3u8 HTTP/1.1\r\nX: " + b"y" * 100:
            try:
                trickle.send(bytes([ch]))
            except OSError:
                closed = True
                break
            time.sleep(0.05)
            if time.time() - t0 > 4:
                break
        expect(closed or trickle.closed_by_peer(3), "trickling client closed")
        expect_eq(srv.get("/master.m3u8").status, 200)


def test_keepalive_timeout_closes():
    with Server(ROOT, extra=TIMEOUTS) as srv:
        c = srv.conn()
        expect_eq(c.request("GET", "/master.m3u8").status, 200)
        t0 = time.time()
        expect(c.closed_by_peer(5), "idle keep-alive closed")
        expect(0.5 < time.time() - t0 < 4, "after about the keep-alive timeout")
        # a connection that keeps working is not closed
        c = srv.conn()
        for _ in range(15):
            expect_eq(c.request("GET", "/master.m3u8").status, 200)
            time.sleep(0.15)
        c.close()


def test_slow_reader_closed():
    with Server(ROOT, extra=TIMEOUTS) as srv:
        s = connect(srv.port, rcvbuf=4096)
        s.sendall(b"GET /misc/big.ts HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(4)  # read nothing: the server's sends stall
        s.settimeout(5)
        got = 0
        closed = False
        try:
            while True:
                d = s.recv(1 << 20)
                if not d:
                    closed = True
                    break
                got += len(d)
        except (ConnectionResetError, socket.timeout, TimeoutError, ssl.SSLError) as e:
            closed = not isinstance(e, (socket.timeout, TimeoutError))
        s.close()
        expect(closed, "slow reader was closed")
        expect(got < 32 << 20, "and did not get the whole body (%d bytes)" % got)
        expect_eq(srv.get("/master.m3u8").status, 200)


def test_max_connections_refused_gracefully():
    with Server(ROOT, extra="limits:\n  max_connections: 20\n") as srv:
        conns = []
        for _ in range(20):
            c = srv.conn()
            expect_eq(c.request("GET", "/master.m3u8").status, 200)
            conns.append(c)
        if srv.tls:  # no plain-text 503 for a TLS client: closed before the handshake
            try:
                srv.conn().close()
                expect(False, "a handshake over the limit succeeded")
            except OSError:
                pass
        else:
            extra = srv.conn()
            r = extra.read_response()
            expect_eq(r.status, 503, "over the limit")
            expect_eq(r.h("connection"), "close")
            expect(extra.closed_by_peer(3), "refused connection closed")
        conns.pop().close()
        time.sleep(0.3)
        c = srv.conn()
        expect_eq(c.request("GET", "/master.m3u8").status, 200, "a slot frees up")
        for c2 in conns + [c]:
            c2.close()


def test_1000_concurrent_keepalive_clients():
    """1,000 clients, each with its own connection, three requests each,
    driven from one selector loop (bounded at 60 s)."""
    n = 1000
    paths = ["/master.m3u8", "/360p/index.m3u8", "/360p/seg_00001.ts"]
    bodies = [lib(p[1:]) for p in paths]
    # Over TLS the handshakes run one by one first: on a loaded machine the
    # first clients must not hit the header timeout while the last connect.
    extra = "limits:\n  max_connections: 4000\n" + ("timeouts:\n  header: 60s\n" if TLS else "")
    with Server(ROOT, workers=2, extra=extra) as srv:
        sel = selectors.DefaultSelector()
        state = {}
        for i in range(n):
            if srv.tls:  # handshakes one by one, then the same non-blocking loop
                s = connect(srv.port)
                s.setblocking(False)
            else:
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", srv.port))
            state[s] = {"step": 0, "buf": b"", "sent": False}
            sel.register(s, selectors.EVENT_WRITE)
        done = ok = 0
        deadline = time.time() + 60
        while done < n and time.time() < deadline:
            for key, ev in sel.select(timeout=1):
                s = key.fileobj
                st = state[s]
                if ev & selectors.EVENT_WRITE:
                    s.send(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % paths[st["step"]]).encode())
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                d = recv_nb(s)
                if d is None:
                    continue
                if not d:
                    sel.unregister(s)
                    s.close()
                    done += 1
                    continue
                st["buf"] += d
                if b"\r\n\r\n" in st["buf"]:
                    head, body = st["buf"].split(b"\r\n\r\n", 1)
                    clen = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
                    if len(body) >= clen:
                        if head.startswith(b"HTTP/1.1 200") and body[:clen] == bodies[st["step"]]:
                            st["step"] += 1
                        else:
                            st["step"] = 99
                        st["buf"] = b""
                        if st["step"] >= len(paths):
                            ok += st["step"] == len(paths)
                            sel.unregister(s)
                            s.close()
                            done += 1
                        else:
                            sel.modify(s, selectors.EVENT_WRITE)
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        expect_eq(ok, n, "clients that got all three responses intact")


def test_sigterm_drains_in_flight():
    with Server(ROOT, workers=2, extra="timeouts:\n  drain: 10s\n") as srv:
        big = lib("misc/big.ts")
        results = {}

        def slow_download():
            s = connect(srv.port, rcvbuf=65536, timeout=60)
            s.sendall(b"GET /misc/big.ts HTTP/1.1\r\nHost: x\r\n\r\n")
            buf = bytearray()  # bytes += would copy quadratically
            while True:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
                time.sleep(0.001)
            head, body = buf.split(b"\r\n\r\n", 1)
            results["head"] = head
            results["body"] = body
            s.close()

        idle = srv.conn()
        expect_eq(idle.request("GET", "/master.m3u8").status, 200)
        t = threading.Thread(target=slow_download)
        t.start()
        time.sleep(0.5)
        srv.signal(signal.SIGTERM)
        t.join(30)
        expect(not t.is_alive(), "download finished")
        expect(results.get("head", b"").startswith(b"HTTP/1.1 200"), "in-flight response")
        expect_eq(sha256(results.get("body", b"")), sha256(big), "in-flight body complete")
        expect(idle.closed_by_peer(3), "idle keep-alive connection closed on drain")
        rc = srv.proc.wait(15)
        expect_eq(rc, 0, "exit status after drain")
        refused = False
        try:
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
        except OSError:
            refused = True
        expect(refused, "no longer accepting")


def test_drain_timeout_bounds_exit():
    with Server(ROOT, extra="timeouts:\n  drain: 1s\n  send: 60s\n") as srv:
        s = connect(srv.port, rcvbuf=4096)
        s.sendall(b"GET /misc/big.ts HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.5)
        t0 = time.time()
        srv.signal(signal.SIGTERM)
        rc = srv.proc.wait(15)
        expect_eq(rc, 0)
        expect(time.time() - t0 < 5, "exit bounded by the drain timeout")
        s.close()


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
