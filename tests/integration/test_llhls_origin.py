"""Low-Latency HLS in front of an origin through the real binary (issue 17),
for what the edge does there today: it passes the origin's answers on.

A small LL origin in this file answers blocking reloads itself (it holds a
request with _HLS_msn/_HLS_part until a timer publishes that part) and
makes its own delta updates, counting the requests it gets per
request-target. Checked:

  - draft-pantos-hls-rfc8216bis 6.2.5.1: a delta update the origin made
    (EXT-X-SKIP) is passed through as it is: the edge does not make one of
    its own in front of an origin;
  - 6.2.5.2 and the cache key: viewers that hold the same directives wait
    on the one fill, and the origin sees one blocking request for them;
  - the directives reach the origin as the player sent them.

Every loop is bounded in count and time."""

import http.server
import os
import socketserver
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, run_main  # noqa: E402
from he_admin import stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-llhls-origin-")
ROOT = os.path.join(TMP, "lib")  # empty: everything comes from the origin
os.makedirs(ROOT, exist_ok=True)
TD, PARTS = 2, 4


class LLOrigin:
    """Publishes one part every TD/PARTS seconds once started; answers
    blocking reloads and deltas itself."""

    def __init__(self):
        self.lock = threading.Condition()
        self.parts = 0  # parts published since the start
        self.counts = {}
        self.first = 100
        self.nseg = 8

    def text(self, skip=False):
        with self.lock:
            done, cur = divmod(self.parts, PARTS)
        nseg = self.nseg + done
        out = ["#EXTM3U", "#EXT-X-VERSION:%d" % (9 if skip else 6), "#EXT-X-TARGETDURATION:%d" % TD,
               "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=12.0",
               "#EXT-X-PART-INF:PART-TARGET=%.3f" % (TD / PARTS), "#EXT-X-MEDIA-SEQUENCE:%d" % self.first]
        skipped = nseg - 6 if skip else 0
        if skipped:
            out.append("#EXT-X-SKIP:SKIPPED-SEGMENTS=%d" % skipped)
        for k in range(skipped, nseg):
            out += ["#EXTINF:%d.000," % TD, "s%d.m4s" % (self.first + k)]
        for i in range(cur):
            out.append('#EXT-X-PART:DURATION=0.500,URI="p%d.%d.m4s"' % (self.first + nseg, i))
        out.append('#EXT-X-PRELOAD-HINT:TYPE=PART,URI="p%d.%d.m4s"' % (self.first + nseg, cur))
        return ("\n".join(out) + "\n").encode()

    def holds(self, msn, part):
        done, cur = divmod(self.parts, PARTS)
        last = self.first + self.nseg + done - 1
        if part is None:
            return msn <= last
        return msn <= last or (msn == last + 1 and part < cur)

    def publish(self):
        with self.lock:
            self.parts += 1
            self.lock.notify_all()

    def serve(self):
        o = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                with o.lock:
                    o.counts[self.path] = o.counts.get(self.path, 0) + 1
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                if not u.path.endswith(".m3u8"):
                    body = b"\0" * 188
                else:
                    if "_HLS_msn" in q:  # the origin's own blocking reload
                        msn = int(q["_HLS_msn"])
                        part = int(q["_HLS_part"]) if "_HLS_part" in q else None
                        deadline = time.monotonic() + 3 * TD
                        with o.lock:
                            while not o.holds(msn, part) and time.monotonic() < deadline:
                                o.lock.wait(max(0.01, deadline - time.monotonic()))
                    body = o.text(skip=q.get("_HLS_skip") == "YES")
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.apple.mpegurl")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "max-age=1")
                self.end_headers()
                self.wfile.write(body)

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.httpd = S(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def conf(port):
    return ("cache:\n  ram_size: 16m\n  prefetch: 0\n  admission: false\n"
            'origin:\n  urls: ["http://127.0.0.1:%d"]\n  retries: 0\n  connect_timeout: 1s\n'
            "  read_timeout: 10s\n  total_timeout: 30s\n" % port)


def test_origin_delta_passed_through():
    """6.2.5.1: the origin's own EXT-X-SKIP answer goes to the player as the
    origin made it."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1) as srv:
            c = srv.conn()
            r = c.request("GET", "/ll/index.m3u8?_HLS_skip=YES")
            c.close()
            expect_eq(r.status, 200, "delta")
            expect(r.body == o.text(skip=True), "the origin's delta, unchanged: %r" % r.body)
            expect(b"#EXT-X-SKIP:SKIPPED-SEGMENTS=2\n" in r.body, "the origin's skip count")
            expect_eq(o.counts.get("/ll/index.m3u8?_HLS_skip=YES"), 1, "the directive reached the origin")
    finally:
        o.stop()


def test_same_directives_one_upstream_request():
    """6.2.5.2: viewers holding the same blocking directives wait on one
    fill; the origin holds one request for them and all get its answer."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            target = "/ll/index.m3u8?_HLS_msn=%d&_HLS_part=0" % (o.first + o.nseg)
            conns = []
            for _ in range(10):
                c = srv.conn()
                c.send("GET %s HTTP/1.1\r\nHost: test\r\n\r\n" % target)
                conns.append(c)
            # all ten are under way before the origin can answer
            wait_for(lambda: o.counts.get(target, 0) >= 1, 5, "the origin got the request")
            time.sleep(0.3)
            o.publish()
            bodies = []
            for c in conns:
                r = c.read_response()
                c.close()
                expect_eq(r.status, 200, "answered")
                bodies.append(r.body)
            expect(all(b == bodies[0] for b in bodies), "one answer for all")
            expect(b"p%d.0.m4s" % (o.first + o.nseg) in bodies[0], "holding the part asked for")
            expect_eq(o.counts.get(target), 1, "one blocking request upstream")
    finally:
        o.stop()


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
