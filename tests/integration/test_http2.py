"""HTTP/2 through the real binary: curl over TLS (ALPN h2) and h2c prior
knowledge, byte-identical segments, the HTTP/1.1 behaviours per stream
(ranges, conditionals, HEAD, CORS, Cache-Control, errors), the edge cache
with many streams waiting on one fill, nghttp's view of our SETTINGS,
h2load with 100 clients x 10 streams, the metrics, and every attack the
server answers with GOAWAY and a counter: rapid reset, CONTINUATION flood,
HPACK bomb and oversized header lists, SETTINGS/PING/PRIORITY floods, a
zero-window slow reader (GOAWAY; a single stream at zero window while
others move is reset alone), streams past the limit and invalid frames.

Clients: curl, nghttp and h2load (nghttp2-client) and python3-h2 for the
frames a client must not send. Skipped (77) without them."""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from he import Server, expect, expect_eq, make_certs, make_library, run_main  # noqa: E402

try:
    from he_h2 import PREFACE, H2, frame, frames, get_once, goaway_code, h2, read_all, wait_goaway  # noqa: E402
except ImportError:
    print("python3-h2 not installed: skipped")
    sys.exit(77)

for tool in ("curl", "nghttp", "h2load"):
    if not shutil.which(tool):
        print("%s not installed (nghttp2-client, curl): skipped" % tool)
        sys.exit(77)

TMP = tempfile.mkdtemp(prefix="he-h2-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=8)
CERTS = make_certs()
SEG = "/1080p/seg_00000.ts"
LIMITS = ("http2:\n  h2c: true\n  max_concurrent_streams: 10\n  max_header_list: 8k\n"
          "  stall_timeout: 1s\n  max_resets: 10\n  max_control_frames: 50\n")


def lib(path):
    with open(os.path.join(ROOT, path.lstrip("/")), "rb") as f:
        return f.read()


def h2c_server(extra="", **kw):
    return Server(ROOT, tls=False, admin=True, extra="http2:\n  h2c: true\n" + extra, **kw)


def stats(srv):
    with urllib.request.urlopen("http://127.0.0.1:%d/stats" % srv.admin_port, timeout=5) as r:
        return json.loads(r.read())


def metrics(srv):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % srv.admin_port, timeout=5) as r:
        return r.read().decode()


def curl(args, timeout=30):
    return subprocess.run(["curl", "-s", "--max-time", "20"] + args, capture_output=True,
                          timeout=timeout)


def still_serves(srv):
    hdrs, body = get_once(srv.port, "/master.m3u8")
    expect_eq(hdrs.get(":status"), "200", "a new connection is served after the attack")
    expect_eq(body, lib("/master.m3u8"), "its body")


# ---------------------------------------------------------------- negotiation


def test_curl_tls_alpn_h2():
    with Server(ROOT, tls=True) as srv:
        out = os.path.join(TMP, "seg-tls")
        r = curl(["--http2", "--cacert", CERTS["ca"], "-o", out, "-w", "%{http_version} %{http_code}",
                  "https://127.0.0.1:%d%s" % (srv.port, SEG)])
        expect_eq(r.stdout.decode(), "2 200", "curl --http2 over TLS")
        with open(out, "rb") as f:
            expect(f.read() == lib(SEG), "segment over h2 byte-identical to the file")
        # a range, and a playlist on the same connection
        r = curl(["--http2", "--cacert", CERTS["ca"], "-r", "1000-1999", "-o", out, "-w", "%{http_code}",
                  "https://127.0.0.1:%d%s" % (srv.port, SEG)])
        expect_eq(r.stdout.decode(), "206")
        with open(out, "rb") as f:
            expect(f.read() == lib(SEG)[1000:2000], "range over h2")
    with Server(ROOT, tls=True, extra="http2:\n  tls: false\n") as srv:
        r = curl(["--http2", "--cacert", CERTS["ca"], "-o", "/dev/null", "-w", "%{http_version}",
                  "https://127.0.0.1:%d%s" % (srv.port, SEG)])
        expect_eq(r.stdout.decode(), "1.1", "http2.tls: false speaks HTTP/1.1")


def test_curl_h2c_prior_knowledge():
    with h2c_server() as srv:
        out = os.path.join(TMP, "seg-h2c")
        r = curl(["--http2-prior-knowledge", "-o", out, "-w", "%{http_version} %{http_code}",
                  "http://127.0.0.1:%d%s" % (srv.port, SEG)])
        expect_eq(r.stdout.decode(), "2 200", "curl --http2-prior-knowledge")
        with open(out, "rb") as f:
            expect(f.read() == lib(SEG), "segment over h2c byte-identical to the file")
        r = curl(["-o", "/dev/null", "-w", "%{http_version} %{http_code}", "http://127.0.0.1:%d%s" % (srv.port, SEG)])
        expect_eq(r.stdout.decode(), "1.1 200", "HTTP/1.1 beside h2c on the same listener")
        s = stats(srv)["http2"]
        expect_eq(s["connections"]["h2c"], 1, "h2c connections")
        expect(s["requests"]["h2"] == 1 and s["requests"]["http/1.1"] == 1, "requests by protocol: %r" % s)
    with Server(ROOT, tls=False) as srv:  # h2c off by default: the preface is no HTTP/1.1 request
        r = curl(["--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}",
                  "http://127.0.0.1:%d%s" % (srv.port, SEG)])
        expect(r.stdout.decode() != "200", "no h2c unless http2.h2c")


def test_nghttp_settings():
    with h2c_server() as srv:
        r = subprocess.run(["nghttp", "-nv", "http://127.0.0.1:%d/master.m3u8" % srv.port], capture_output=True,
                           timeout=30)
        out = r.stdout.decode()
        recv = out[out.index("recv SETTINGS"):]
        for want in ("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):100", "SETTINGS_INITIAL_WINDOW_SIZE(0x04):65536",
                     "SETTINGS_MAX_HEADER_LIST_SIZE(0x06):16384", "SETTINGS_NO_RFC7540_PRIORITIES(0x09):1"):
            expect(want in recv, "nghttp -nv shows %s:\n%s" % (want, out[:3000]))
        expect(":status: 200" in out, "the playlist answered")


# ---------------------------------------------------------------- behaviour per stream


def test_behaviour_per_stream():
    log = os.path.join(TMP, "access-h2.log")
    with h2c_server(extra='log:\n  access: "%s"\n' % log) as srv:
        cl = H2(srv.port)
        seg, pl = lib(SEG), lib("/master.m3u8")
        ids = {
            "full": cl.request(SEG),
            "range": cl.request(SEG, headers=[("range", "bytes=100-199")]),
            "head": cl.request(SEG, method="HEAD"),
            "pl": cl.request("/master.m3u8"),
            "404": cl.request("/nope.ts"),
            "405": cl.request("/master.m3u8", method="DELETE"),
            "416": cl.request(SEG, headers=[("range", "bytes=999999999-")]),
            "opt": cl.request("*", method="OPTIONS"),
            "bad": cl.request("/../etc/passwd"),
        }
        h, b = cl.response(ids["full"])
        expect(h[":status"] == "200" and b == seg, "full segment on a stream")
        expect_eq(h.get("content-length"), str(len(seg)))
        expect_eq(h.get("cache-control"), "public, max-age=86400, immutable", "Cache-Control for .ts")
        expect_eq(h.get("access-control-allow-origin"), "*", "CORS")
        expect_eq(h.get("accept-ranges"), "bytes")
        etag = h["etag"]
        h, b = cl.response(ids["range"])
        expect(h[":status"] == "206" and b == seg[100:200], "range")
        expect_eq(h.get("content-range"), "bytes 100-199/%d" % len(seg))
        h, b = cl.response(ids["head"])
        expect(h[":status"] == "200" and b == b"" and h.get("content-length") == str(len(seg)), "HEAD")
        h, b = cl.response(ids["pl"])
        expect(h[":status"] == "200" and b == pl and h["content-type"] == "application/vnd.apple.mpegurl",
               "playlist")
        expect_eq(cl.response(ids["404"])[0][":status"], "404")
        h, _ = cl.response(ids["405"])
        expect(h[":status"] == "405" and h.get("allow") == "GET, HEAD, OPTIONS", "405 with Allow: %r" % h)
        expect_eq(cl.response(ids["416"])[0][":status"], "416")
        expect_eq(cl.response(ids["opt"])[0][":status"], "204")
        expect_eq(cl.response(ids["bad"])[0][":status"], "400")
        h, b = cl.response(cl.request(SEG, headers=[("if-none-match", etag)]))
        expect(h[":status"] == "304" and b == b"", "conditional 304")
        h, b = cl.response(cl.request(SEG, headers=[("if-match", '"other"')]))
        expect_eq(h[":status"], "412")
        cl.close()
        time.sleep(0.5)
        m = metrics(srv)
        expect('protocol_requests_total{worker="0",protocol="h2"} 11' in m, "h2 requests in /metrics")
        expect("hlsedge_http2_streams_open" in m and "hlsedge_http2_goaways_total" in m, "h2 metrics")
    if True:  # the server has stopped: its access log is complete
        with open(log) as f:
            lines = f.read().splitlines()
        expect(any('"GET %s HTTP/2.0" 200 ' % SEG in l for l in lines), "access log names HTTP/2.0:\n%s" % lines[:3])
        expect(any('"GET %s HTTP/2.0" 206 ' % SEG in l for l in lines), "the range's line")


def test_priorities_default_playlists_first():
    """Without a priority signal a playlist asked after a large segment
    comes before it ends (urgency 1 against 2..6)."""
    with h2c_server() as srv:
        cl = H2(srv.port)
        big = cl.request("/misc/big.ts")
        pl = cl.request("/master.m3u8")
        order = []
        cl.pump(lambda: len([e for e in cl.events if isinstance(e, h2.events.StreamEnded)]) == 2, 20)
        for e in cl.events:
            if isinstance(e, h2.events.StreamEnded):
                order.append(e.stream_id)
        expect_eq(order, [pl, big], "playlist ended before the large segment")
        cl.close()


def test_cache_fill_many_streams():
    """Streams of two connections wait on one origin fill: one origin
    request, every stream gets the whole body."""
    from origin import Origin, segment_bytes
    body = segment_bytes("/live/s1.ts", 600000)
    org = Origin(files={"/live/s1.ts": body}).start()
    try:
        extra = 'origin:\n  urls: ["%s"]\n' % org.url
        with h2c_server(extra=extra) as srv:
            a, b = H2(srv.port), H2(srv.port)
            sa = [a.request("/live/s1.ts") for _ in range(4)]
            sb = [b.request("/live/s1.ts") for _ in range(4)]
            for cl, ids in ((a, sa), (b, sb)):
                for sid in ids:
                    h, got = cl.response(sid, 20)
                    expect(h[":status"] == "200" and got == body, "stream %d from the fill" % sid)
            expect_eq(org.count("/live/s1.ts"), 1, "one origin request for 8 streams")
            a.close()
            b.close()
    finally:
        org.stop()


def test_h2load_100_clients_10_streams():
    with h2c_server(extra="limits:\n  max_connections: 1000\n") as srv:
        for path, n in (("/master.m3u8", 20000), ("/360p/seg_00001.ts", 2000)):
            r = subprocess.run(["h2load", "-c", "100", "-m", "10", "-n", str(n), "http://127.0.0.1:%d%s" % (srv.port, path)],
                               capture_output=True, timeout=120)
            out = r.stdout.decode()
            expect("requests: %d total, %d started, %d done, %d succeeded, 0 failed, 0 errored, 0 timeout"
                   % (n, n, n, n) in out, "h2load %s:\n%s" % (path, out))
            expect("status codes: %d 2xx" % n in out, "all 2xx")


def test_loadgen_http2():
    """hlsedge-loadgen --http2: each viewer's requests are streams of one
    connection, over h2c and over TLS (ALPN h2)."""
    lg = os.environ.get("HE_LOADGEN") or os.path.join(os.path.dirname(os.path.dirname(HERE)), "build",
                                                     "hlsedge-loadgen")
    if not os.path.exists(lg):
        print("no hlsedge-loadgen: part skipped")
        return
    for tls in (False, True):
        extra = "" if tls else "http2:\n  h2c: true\n"
        with Server(ROOT, tls=tls, admin=True, extra=extra) as srv:
            url = "%s://127.0.0.1:%d/master.m3u8" % ("https" if tls else "http", srv.port)
            r = subprocess.run([lg, "--http2", "--viewers", "8", "--pace", "linerate", "-d", "2s", "--json", "-q",
                                "--verify", "-k", url], capture_output=True, timeout=60)
            out = json.loads(r.stdout.decode())
            expect(out["requests"] > 8 and out["errors"] == 0, "loadgen --http2 (tls %s): %r" % (tls, r.stdout[:600]))
            time.sleep(0.3)
            h = stats(srv)["http2"]
            expect_eq(h["connections"]["h2" if tls else "h2c"], out["connects"], "one connection per viewer")
            expect(h["requests"]["h2"] >= out["requests"] and h["requests"]["http/1.1"] == 0, "all on h2: %r" % h)


# ---------------------------------------------------------------- attacks


def goaways(srv):
    return stats(srv)["http2"]["goaways"]


def test_rapid_reset():
    with h2c_server(extra=LIMITS[len("http2:\n  h2c: true\n"):]) as srv:
        cl = H2(srv.port)
        t0 = time.time()
        for _ in range(1000):
            if cl.send_failed:
                break
            sid = cl.request(SEG)
            cl.c.reset_stream(sid)
            try:
                cl.flush()
            except OSError:
                break
        g = wait_goaway(cl)
        expect(g is not None and g.error_code == 11, "GOAWAY(ENHANCE_YOUR_CALM) for rapid reset: %r" % g)
        expect(time.time() - t0 < 15, "bounded")
        expect(goaways(srv)["rapid_reset"] >= 1, "counted")
        cl.close()
        still_serves(srv)


def test_continuation_flood():
    with h2c_server(extra=LIMITS[len("http2:\n  h2c: true\n"):]) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(PREFACE + frame(4, 0, 0))
        # a HEADERS frame without END_HEADERS, then CONTINUATION frames forever
        # (each a literal header "x: y" without indexing)
        s.sendall(frame(1, 0x1, 1, b"\x82\x84\x86"))
        sent = 0
        try:
            for _ in range(5000):
                s.sendall(frame(9, 0, 1, b"\x00\x01x\x01y"))
                sent += 1
        except OSError:
            pass
        got = read_all(s)
        s.close()
        expect_eq(goaway_code(got), 11, "GOAWAY(ENHANCE_YOUR_CALM) after %d CONTINUATION frames" % sent)
        expect(goaways(srv)["flood"] + goaways(srv)["header_list"] >= 1, "counted: %r" % goaways(srv))
        still_serves(srv)


def test_hpack_bomb_and_large_header_list():
    with h2c_server(extra=LIMITS[len("http2:\n  h2c: true\n"):]) as srv:
        # one 3 KB value in the dynamic table, then referenced 100 times:
        # a few hundred bytes on the wire, 300 KB of header list
        cl = H2(srv.port)
        cl.request("/master.m3u8", headers=[("x-bomb", "A" * 3000)] * 100)
        g = wait_goaway(cl)
        expect(g is not None and g.error_code == 11, "GOAWAY for the HPACK bomb: %r" % g)
        cl.close()
        cl = H2(srv.port)
        cl.request("/master.m3u8", headers=[("x-h%d" % i, "v" * 200) for i in range(60)])
        expect(wait_goaway(cl) is not None, "GOAWAY for a 14 KB header list")
        cl.close()
        expect(goaways(srv)["header_list"] >= 2, "counted: %r" % goaways(srv))
        still_serves(srv)


def control_flood(srv, one):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(PREFACE + frame(4, 0, 0))
    try:
        for _ in range(2000):
            s.sendall(one)
    except OSError:
        pass
    got = read_all(s)
    s.close()
    return got


def test_settings_ping_priority_floods():
    with h2c_server(extra=LIMITS[len("http2:\n  h2c: true\n"):]) as srv:
        for name, one in (("SETTINGS", frame(4, 0, 0, struct.pack(">HI", 3, 100))),
                          ("PING", frame(6, 0, 0, b"12345678")),
                          ("PRIORITY", frame(2, 0, 3, struct.pack(">IB", 0, 16)))):
            before = goaways(srv)["flood"]
            got = control_flood(srv, one)
            expect_eq(goaway_code(got), 11, "%s flood answered with GOAWAY(ENHANCE_YOUR_CALM)" % name)
            expect(goaways(srv)["flood"] > before, "%s flood counted" % name)
        still_serves(srv)


def test_zero_window_slow_read():
    """A client that reads nothing (RFC 9113 6.9: it never opens the
    connection's window, or leaves every stream's at zero) gets GOAWAY
    after http2.stall_timeout."""
    cases = (("the connection's window", {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20}),
             ("every stream's window", {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0}))
    with h2c_server(extra=LIMITS[len("http2:\n  h2c: true\n"):]) as srv:
        for name, settings in cases:
            before = stats(srv)["http2"]["goaways"]["stalled"]
            cl = H2(srv.port, settings=settings)
            cl.request(SEG)
            t0 = time.time()
            cl.pump(lambda: cl.goaway is not None or cl.closed, 10, ack=False)
            expect(cl.goaway is not None or cl.closed, "%s at zero: the stalled connection ended" % name)
            expect(time.time() - t0 < 6, "after http2.stall_timeout, bounded")
            cl.close()
            time.sleep(0.3)
            s = stats(srv)["http2"]
            expect(s["goaways"]["stalled"] == before + 1, "%s: GOAWAY counted as stalled: %r" % (name, s))
            expect(s["streams_open"] == 0, "no stream left open: %r" % s)
        still_serves(srv)


def test_stalled_stream_reset_alone():
    """A stream whose window the client leaves at zero is reset after
    http2.stall_timeout (RST_STREAM CANCEL, RFC 9113 8.1/7), not the
    connection: a stream beside it, read slowly all along, completes."""
    with h2c_server(extra=LIMITS[len("http2:\n  h2c: true\n"):]) as srv:
        cl = H2(srv.port)
        read = cl.request("/misc/big.ts")
        stalled = cl.request(SEG)
        body, t0, reset_at = bytearray(), time.time(), None
        ended = lambda: any(isinstance(e, h2.events.StreamEnded) and e.stream_id == read for e in cl.events)
        # read about 2 MB/s: the 8 MB stream outlives the 1 s stall timeout
        while not ended() and not cl.closed and time.time() - t0 < 30:
            cl.sock.settimeout(5)
            try:
                data = cl.sock.recv(65536)
            except OSError:
                break
            if not data:
                cl.closed = True
                break
            for e in cl.c.receive_data(data):
                cl.events.append(e)
                if isinstance(e, h2.events.DataReceived):
                    if e.stream_id == read:
                        body += e.data
                        cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                    else:  # the connection's window back, never the stream's
                        cl.c.increment_flow_control_window(e.flow_controlled_length)
                if isinstance(e, h2.events.StreamReset) and e.stream_id == stalled and reset_at is None:
                    reset_at = time.time() - t0
                if isinstance(e, h2.events.ConnectionTerminated):
                    cl.goaway = e
            cl.flush()
            time.sleep(0.03)
        resets = [e for e in cl.events if isinstance(e, h2.events.StreamReset)]
        expect_eq([(e.stream_id, e.error_code) for e in resets], [(stalled, 8)],
                  "the stalled stream, and only it, reset with CANCEL")
        expect(reset_at is not None and reset_at >= 0.9, "after the stall timeout: %r s" % reset_at)
        expect(ended(), "the stream that was read ended")
        expect_eq(bytes(body), lib("/misc/big.ts"), "its body, byte-identical")
        expect(cl.goaway is None and not cl.closed, "no GOAWAY: the connection made progress")
        hdrs, pl = cl.response(cl.request("/master.m3u8"))
        expect_eq((hdrs.get(":status"), pl), ("200", lib("/master.m3u8")), "the connection serves on")
        cl.close()
        s = stats(srv)["http2"]
        expect_eq(s["stream_stall_resets"], 1, "one stalled stream counted: %r" % s)
        expect_eq(s["goaways"]["stalled"], 0, "no stall GOAWAY: %r" % s)
        expect("hlsedge_http2_stream_stall_resets_total" in metrics(srv), "in /metrics")


def test_streams_past_the_limit():
    with h2c_server(extra=LIMITS[len("http2:\n  h2c: true\n"):]) as srv:
        # no WINDOW_UPDATE after the first 64 KB: every stream stays open
        cl = H2(srv.port)
        ids = [cl.request("/misc/big.ts") for _ in range(15)]
        resets = lambda: [e for e in cl.events if isinstance(e, h2.events.StreamReset)]
        cl.pump(lambda: len(resets()) >= 5, 5, ack=False)
        refused = [e for e in resets() if e.error_code == 7]
        expect(len(refused) >= 5, "streams past max_concurrent_streams (10) refused: %r" % resets())
        expect(set(e.stream_id for e in refused) <= set(ids[10:]), "the last ones")
        cl.close()
        time.sleep(0.3)
        expect(stats(srv)["http2"]["streams_refused"] >= 5, "counted")
        still_serves(srv)


def test_invalid_frames_protocol_error():
    with h2c_server() as srv:
        cases = (("DATA on stream 0", frame(0, 0, 0, b"x")),
                 ("HEADERS on an even stream", frame(1, 0x5, 2, b"\x82\x84\x86")),
                 ("SETTINGS with a stream", frame(4, 0, 1)),
                 ("WINDOW_UPDATE of 0", frame(8, 0, 0, struct.pack(">I", 0))))
        for name, bad in cases:
            before = goaways(srv)["protocol_error"]
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(PREFACE + frame(4, 0, 0) + bad)
            got = read_all(s)
            s.close()
            expect_eq(goaway_code(got), 1, "%s: GOAWAY(PROTOCOL_ERROR)" % name)
            expect(goaways(srv)["protocol_error"] > before, "%s counted" % name)
        still_serves(srv)


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
