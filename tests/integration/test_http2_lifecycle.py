"""HTTP/2 streams through the real binary, over a connection's life:
client RFC 9218 priorities (the priority header and PRIORITY_UPDATE)
change the order of DATA; a reload that starts a new worker generation and
a shutdown drain each let a stream in flight finish byte-identical after
GOAWAY(NO_ERROR), and new streams go to the new generation; an idle
connection gets GOAWAY and is closed; and what HTTP/1.1 requests are
checked for by the handlers holds for streams: signed-URL tokens in the
query and in a cookie (handler/auth.c), Via loops (508, handler/via.c) and
a viewer PURGE's bearer token (Authorization).

Clients: python3-h2 (he_h2.H2) and, where a client must read on after a
GOAWAY, he_h2.RawH2. Skipped (77) without python3-h2 / python3-hpack."""

import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from he import Conn, Server, expect, expect_eq, free_port, make_library, run_main, sha256  # noqa: E402
from he_admin import stats, wait_for  # noqa: E402

try:
    from he_h2 import H2, RawH2, frame, h2  # noqa: E402
    import hpack  # noqa: E402,F401
except ImportError:
    print("python3-h2 / python3-hpack not installed: skipped")
    sys.exit(77)
from he_token import edgeauth  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-h2life-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=8)
BIG = "/misc/big.ts"
KEY = "6b2c1f0e9d8a7b6c5d4e3f2a1b0c9d8e"


def lib(path, root=ROOT):
    with open(os.path.join(root, path.lstrip("/")), "rb") as f:
        return f.read()


def h2c_server(extra="", **kw):
    return Server(ROOT, tls=False, admin=True, extra="http2:\n  h2c: true\n" + extra, **kw)


def ended_order(cl):
    return [e.stream_id for e in cl.events if isinstance(e, h2.events.StreamEnded)]


def wide_open(cl):
    """Windows far larger than a body, so no stream ever waits on one: the
    order of DATA is the server's scheduling alone."""
    cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: (1 << 30)})
    cl.c.increment_flow_control_window((1 << 30) - 65535)
    cl.flush()


# ---------------------------------------------------------------- priorities


def test_client_priority_header_reorders():
    """RFC 9218 4: the client's priority header wins over the defaults. A
    playlist asked at u=7 and an 8 MB segment at u=0: the segment's DATA
    all go first (without a signal the playlist goes first, as
    test_http2.py's test_priorities_default_playlists_first shows)."""
    with h2c_server() as srv:
        cl = H2(srv.port)
        wide_open(cl)
        big = cl.request(BIG, headers=[("priority", "u=0")])
        pl = cl.request("/master.m3u8", headers=[("priority", "u=7")])
        cl.pump(lambda: len(ended_order(cl)) == 2, 20)
        expect_eq(ended_order(cl), [big, pl], "the urgent segment ended before the playlist")
        _, body = cl.response(big)
        expect_eq(sha256(body), sha256(lib(BIG)), "segment body")
        cl.close()


def test_priority_update_frame_reorders():
    """RFC 9218 7.1: PRIORITY_UPDATE (type 0x10 on stream 0: the stream's
    id, then a priority field value) sent with the requests. The same pair
    without any priority header: the updates alone put the segment
    first."""
    with h2c_server() as srv:
        # SETTINGS_NO_RFC7540_PRIORITIES (RFC 9218 2.1), as such a client sends
        cl = H2(srv.port, first_settings={9: 1})
        wide_open(cl)
        sid_big = cl.c.get_next_available_stream_id()
        hdrs = [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1")]
        cl.c.send_headers(sid_big, hdrs + [(":path", BIG)], end_stream=True)
        sid_pl = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid_pl, hdrs + [(":path", "/master.m3u8")], end_stream=True)
        upd = lambda sid, v: frame(0x10, 0, 0, sid.to_bytes(4, "big") + v)
        # one write: the updates are read with the requests they change
        cl.sock.sendall(cl.c.data_to_send() + upd(sid_big, b"u=0") + upd(sid_pl, b"u=7"))
        cl.pump(lambda: len(ended_order(cl)) == 2, 20)
        expect_eq(ended_order(cl), [sid_big, sid_pl], "PRIORITY_UPDATE put the segment first")
        cl.close()


# ---------------------------------------------------------------- reload, drain, idle


def slow_stream(srv, path=BIG):
    """A raw h2c client reading path slowly (about 2 MB/s, small socket
    buffer): it is still in flight a second later."""
    cl = RawH2(srv.port, rcvbuf=65536, timeout=30)
    sid = cl.get(path)
    cl.read(lambda: len(cl.body[sid]) > 256 * 1024, wait=10, delay=0.03)
    expect(sid not in cl.ended and len(cl.body[sid]) > 0, "the stream is under way")
    return cl, sid


def test_reload_new_generation_mid_stream():
    """SIGHUP with a new root (a key that starts a new worker generation):
    the stream under way finishes from the old generation byte-identical
    after a GOAWAY(NO_ERROR) naming it; a new connection's streams are the
    new generation's (the new root's playlist)."""
    root2 = os.path.join(TMP, "lib2")
    shutil.copytree(ROOT, root2, symlinks=True)
    with open(os.path.join(root2, "master.m3u8"), "a") as f:
        f.write("# generation 2\n")
    with h2c_server(extra="timeouts:\n  drain: 20s\n") as srv:
        cl, sid = slow_stream(srv)
        with open(srv.conf) as f:
            text = f.read()
        with open(srv.conf, "w") as f:
            f.write(text.replace("root: %s\n" % ROOT, "root: %s\n" % root2))
        srv.signal(signal.SIGHUP)
        wait_for(lambda: stats(srv)["config"]["generation"] == 2, 10, "generation 2")
        cl.read(lambda: sid in cl.ended, wait=40, delay=0.01)
        expect(cl.goaway is not None, "GOAWAY on the old generation's connection")
        expect_eq(cl.goaway, (sid, 0), "GOAWAY(NO_ERROR) names the stream in flight as the last")
        expect(sid in cl.ended and sid not in cl.resets, "the stream in flight ended")
        expect_eq(cl.status.get(sid), "200", "its status")
        expect_eq(sha256(bytes(cl.body[sid])), sha256(lib(BIG)), "its body, byte-identical")
        cl.read(lambda: False, wait=5)
        expect(cl.closed, "the old connection closed after its last stream")
        cl.close()
        nc = H2(srv.port)
        hdrs, body = nc.response(nc.request("/master.m3u8"))
        expect_eq((hdrs.get(":status"), body), ("200", lib("/master.m3u8", root2)),
                  "a new connection's stream is served by the new generation")
        nc.close()


def test_sigterm_drain_mid_stream():
    """SIGTERM: GOAWAY(NO_ERROR), the stream in flight finishes
    byte-identical within timeouts.drain, the process exits 0 and accepts
    no more."""
    with h2c_server(extra="timeouts:\n  drain: 20s\n") as srv:
        idle = H2(srv.port)
        hdrs, _ = idle.response(idle.request("/master.m3u8"))
        expect_eq(hdrs.get(":status"), "200")
        cl, sid = slow_stream(srv)
        srv.signal(signal.SIGTERM)
        cl.read(lambda: sid in cl.ended, wait=40, delay=0.01)
        expect_eq(cl.goaway, (sid, 0), "GOAWAY(NO_ERROR) naming the stream in flight")
        expect(sid in cl.ended and sid not in cl.resets, "the stream in flight ended")
        expect_eq(sha256(bytes(cl.body[sid])), sha256(lib(BIG)), "its body, byte-identical")
        idle.pump(lambda: idle.goaway is not None, 5)
        expect(idle.goaway is not None and idle.goaway.error_code == 0, "the idle connection: GOAWAY(NO_ERROR)")
        idle.pump(lambda: False, 3)
        expect(idle.closed, "and closed")
        rc = srv.proc.wait(15)
        expect_eq(rc, 0, "exit status after the drain")
        refused = False
        try:
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
        except OSError:
            refused = True
        expect(refused, "no longer accepting")
        cl.close()
        idle.close()


def test_idle_timeout_goaway_then_close():
    """RFC 9113 9.1: no stream for http2.idle_timeout, GOAWAY(NO_ERROR)
    naming the last stream served, then the close."""
    with h2c_server(extra="  idle_timeout: 1s\n") as srv:
        cl = H2(srv.port)
        sid = cl.request("/master.m3u8")
        hdrs, _ = cl.response(sid)
        expect_eq(hdrs.get(":status"), "200")
        t0 = time.time()
        cl.pump(lambda: cl.goaway is not None, 10)
        took = time.time() - t0
        expect(cl.goaway is not None, "GOAWAY after the idle timeout")
        expect_eq((cl.goaway.error_code, cl.goaway.last_stream_id), (0, sid), "NO_ERROR, last stream")
        expect(0.8 <= took < 6, "after about idle_timeout (1 s): %.2f s" % took)
        cl.pump(lambda: False, 3)
        expect(cl.closed, "closed after the GOAWAY")
        cl.close()
        expect(stats(srv)["http2"]["goaways"]["no_error"] >= 1, "counted as no_error")


def test_origin_wait_is_no_stall():
    """A stream waiting on its origin fill is not the client's stall: an
    origin that answers after 1.5 s and then trickles its body over about
    2 s, with http2.stall_timeout 1 s, is streamed whole; nothing is reset,
    no GOAWAY."""
    from origin import Origin, segment_bytes
    body = segment_bytes("/o/slow.ts", 400000)
    org = Origin(files={"/o/slow.ts": body}).start()
    org.behave("/o/slow.ts", delay=1.5, rate=200000)
    try:
        with h2c_server(extra='  stall_timeout: 1s\norigin:\n  urls: ["%s"]\n' % org.url) as srv:
            cl = H2(srv.port)
            sid = cl.request("/o/slow.ts")
            hdrs, got = cl.response(sid, 30)
            expect_eq(hdrs.get(":status"), "200", "status")
            expect_eq(sha256(got), sha256(body), "the whole body")
            expect(not [e for e in cl.events if isinstance(e, h2.events.StreamReset)], "no reset")
            expect(cl.goaway is None and not cl.closed, "no GOAWAY")
            cl.close()
            st = stats(srv)["http2"]
            expect_eq((st["stream_stall_resets"], st["goaways"]["stalled"]), (0, 0), "no stall counted")
    finally:
        org.stop()


# ---------------------------------------------------------------- handlers' header checks


def both(srv, path, headers=()):
    """(HTTP/1.1 status, h2 status) of the same request."""
    c = Conn(srv.port)
    r1 = c.request("GET", path, dict(headers))
    c.close()
    cl = H2(srv.port)
    hdrs, _ = cl.response(cl.request(path, headers=[(k.lower(), v) for k, v in headers]))
    cl.close()
    return r1.status, int(hdrs.get(":status", 0))


def test_auth_and_via_as_http1():
    """Signed URLs (query token, token cookie) and Via loops give the same
    answers over h2 as over HTTP/1.1: the cookie and Via fields reach the
    handlers through the same capture (http1.c's table)."""
    rule = ('auth:\n  - prefix: /360p/\n    scheme: edgeauth\n    keys: ["%s"]\n    cookie: true\n'
            '    clock_skew: 30s\n' % KEY)
    with h2c_server(extra=rule) as srv:
        tok = edgeauth(KEY, acl="/*", exp=int(time.time()) + 300)
        seg = "/360p/seg_00000.ts"
        q = "?__token__=" + urllib.parse.quote(tok, safe="")
        cases = [
            ("no token", seg, (), 403),
            ("query token", seg + q, (), 200),
            ("token cookie", seg, [("Cookie", "a=b; __token__=" + tok)], 200),
            ("two token cookies", seg, [("Cookie", "__token__=%s; __token__=%s" % (tok, tok))], 403),
            ("wrong token cookie", seg, [("Cookie", "__token__=" + tok[:-4] + "0000")], 403),
        ]
        for name, path, hdrs, want in cases:
            expect_eq(both(srv, path, hdrs), (want, want), name + ": HTTP/1.1 and h2")
        # a cookie an h2 client split in two fields (RFC 9113 8.2.3)
        cl = H2(srv.port)
        hdrs, _ = cl.response(cl.request(seg, headers=[("cookie", "a=b"), ("cookie", "__token__=" + tok)]))
        expect_eq(hdrs.get(":status"), "200", "split cookie fields joined")
        cl.close()
        # the name this box gives itself in Via: a request naming it is a loop
        me = "hlsedge-" + "".join(ch if ch.isalnum() or ch in ".-_" else "-" for ch in socket.gethostname())
        expect_eq(both(srv, "/master.m3u8", [("Via", "1.1 %s" % me)]), (508, 508), "Via loop")
        expect_eq(both(srv, "/master.m3u8", [("Via", "1.1 proxy-a, 1.1 %s" % me)]), (508, 508),
                  "Via loop, second entry")
        expect_eq(both(srv, "/master.m3u8", [("Via", "1.1 other-box")]), (200, 200), "another box: no loop")


def local_address():
    """A non-loopback address of this host, or None."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("192.0.2.254", 9))  # no packet is sent: the route's source address
        addr = s.getsockname()[0]
        s.close()
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def test_purge_bearer_token_over_h2():
    """A viewer PURGE from outside loopback needs admin.token_file's token
    in Authorization: 401 without, an answer with, over HTTP/1.1 and h2.
    Needs a non-loopback address of this host to come from."""
    addr = local_address()
    if not addr:
        print("  no non-loopback address: the Authorization check needs one, skipped")
        return
    tokf = os.path.join(TMP, "purge.token")
    token = "t0k3n-for-purge-0123456789abcdef"
    with open(tokf, "w") as f:
        f.write(token + "\n")
    from origin import Origin
    org = Origin(files={"/o/a.ts": b"a" * 1000}).start()
    port = free_port()
    srv = Server(ROOT, tls=False, admin=True,
                 extra='http2:\n  h2c: true\norigin:\n  urls: ["%s"]\n' % org.url,
                 listen=["127.0.0.1:%d" % port, "%s:%d" % (addr, port)])
    srv.port = srv.plain_port = port
    with open(srv.conf) as f:
        text = f.read()
    with open(srv.conf, "w") as f:
        f.write(text.replace("admin:\n", 'admin:\n  token_file: "%s"\n' % tokf))
    try:
        with srv:
            for auth, want in ((None, 401), ("Bearer " + token[:-1] + "X", 401), ("Bearer " + token, None)):
                hdrs = [("authorization", auth)] if auth else []
                cl = H2(port, host=addr)
                got, _ = cl.response(cl.request("/o/a.ts", method="PURGE", headers=hdrs))
                cl.close()
                c = Conn(port, host=addr)
                r1 = c.request("PURGE", "/o/a.ts", dict(hdrs))
                c.close()
                st2 = int(got.get(":status", 0))
                if want:
                    expect_eq((r1.status, st2), (want, want), "PURGE from %s with %r" % (addr, auth))
                else:
                    expect(r1.status in (200, 404) and st2 in (200, 404),
                           "PURGE with the bearer token accepted: HTTP/1.1 %d, h2 %d" % (r1.status, st2))
    finally:
        org.stop()

if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
