"""Low-Latency HLS in front of an origin through the real binary (issue 17).

A small LL origin in this file answers blocking reloads itself (it holds a
request with _HLS_msn/_HLS_part until the test publishes that part), holds
requests for its preload hint until that part is published, makes its own
delta updates, and counts the requests it gets per request-target and how
many playlist requests it had in flight at once. With can_block False it
says no CAN-BLOCK-RELOAD and answers every request at once, directives or
not. Checked, each with its section of draft-pantos-hls-rfc8216bis:

  - 6.2.5.2: viewers that hold any mix of directives for one playlist are
    held by the edge, which makes one blocking request upstream per
    playlist update, for the next part, and answers them all from its copy
    (plain requests too, while that copy is current); nothing goes
    upstream once none is held;
  - 6.2.5.2: an origin without CAN-BLOCK-RELOAD is polled at most every
    PART-TARGET/2 with one request in flight;
  - 6.2.5.2: 400 for directives past the copy's limits, 503 after three
    target durations;
  - 6.2.5.1: the edge makes delta updates from its own full copy; a request
    with _HLS_skip alone gets the origin's own delta, passed through;
  - 6.2.6: requests for the preload hint collapse into one origin request
    and get the whole part, open-ended byte ranges (RFC 8673) too; parts
    that left the playlist stay servable for three target durations;
  - Appendix B.1: 6 TD on a blocking answer, Age from the edge's copy,
    gzip when asked.

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
    """Publishes a part each time publish() is called; answers blocking
    reloads (when can_block) and deltas itself."""

    def __init__(self, can_block=True):
        self.lock = threading.Condition()
        self.parts = 0  # parts published since the start
        self.counts = {}
        self.first = 100
        self.nseg = 8
        self.can_block = can_block
        self.inflight = 0  # playlist requests being answered
        self.max_inflight = 0
        self.abandoned = set()  # (msn, index) of hinted parts that will never come

    def text(self, skip=False):
        with self.lock:
            done, cur = divmod(self.parts, PARTS)
        nseg = self.nseg + done
        control = "CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=12.0" if self.can_block else "CAN-SKIP-UNTIL=12.0"
        out = ["#EXTM3U", "#EXT-X-VERSION:%d" % (9 if skip else 6), "#EXT-X-TARGETDURATION:%d" % TD,
               "#EXT-X-SERVER-CONTROL:" + control,
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

    def position(self):
        """(msn, index) of the next part to be published."""
        done, cur = divmod(self.parts, PARTS)
        return self.first + self.nseg + done, cur

    def holds(self, msn, part):
        done, cur = divmod(self.parts, PARTS)
        last = self.first + self.nseg + done - 1
        if part is None:
            return msn <= last
        return msn <= last or (msn == last + 1 and part < cur)

    def part_state(self, msn, idx):
        """'out', 'future' (not published yet) or 'gone' (left the playlist)."""
        if (msn, idx) in self.abandoned:
            return "gone"
        nxt_msn, nxt = self.position()
        k, now = msn * PARTS + idx, nxt_msn * PARTS + nxt
        if k >= now:
            return "future"
        # parts are listed only for the segment being made
        return "out" if msn == nxt_msn else "gone"

    def part_body(self, msn, idx):
        return (b"part %d.%d " % (msn, idx)) * 64

    def abandon(self, msn, idx):
        with self.lock:
            self.abandoned.add((msn, idx))
            self.lock.notify_all()

    def publish(self, n=1):
        with self.lock:
            self.parts += n
            self.lock.notify_all()

    def playlist_requests(self):
        with self.lock:
            return sum(v for k, v in self.counts.items() if ".m3u8" in k)

    def serve(self):
        o = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, code, body, max_age, ctype="application/vnd.apple.mpegurl"):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "max-age=%d" % max_age)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                with o.lock:
                    o.counts[self.path] = o.counts.get(self.path, 0) + 1
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                name = u.path.rsplit("/", 1)[-1]
                if name.startswith("p") and name.endswith(".m4s"):
                    msn, idx = (int(x) for x in name[1:-4].split("."))
                    deadline = time.monotonic() + 3 * TD
                    with o.lock:  # 6.2.6: a hinted part is held until it is out
                        while o.part_state(msn, idx) == "future" and time.monotonic() < deadline:
                            o.lock.wait(max(0.01, deadline - time.monotonic()))
                        state = o.part_state(msn, idx)
                    if state != "out":
                        return self._send(404, b"no such part\n", TD, "text/plain")
                    return self._send(200, o.part_body(msn, idx), 6 * TD, "video/mp4")
                if not u.path.endswith(".m3u8"):
                    return self._send(200, b"\0" * 188, 6 * TD, "video/mp4")
                if name == "missing.m3u8":
                    return self._send(404, b"not found\n", TD, "text/plain")
                if name == "vod.m3u8":  # ended: directives mean nothing
                    return self._send(200, o.text().replace(b"#EXT-X-PRELOAD", b"#EXT-X-ENDLIST\n#X"), 60)
                with o.lock:
                    o.inflight += 1
                    o.max_inflight = max(o.max_inflight, o.inflight)
                try:
                    if "_HLS_msn" in q and o.can_block:  # the origin's own blocking reload
                        msn = int(q["_HLS_msn"])
                        part = int(q["_HLS_part"]) if "_HLS_part" in q else None
                        deadline = time.monotonic() + 3 * TD
                        with o.lock:
                            while not o.holds(msn, part) and time.monotonic() < deadline:
                                o.lock.wait(max(0.01, deadline - time.monotonic()))
                    body = o.text(skip=q.get("_HLS_skip") == "YES")
                finally:
                    with o.lock:
                        o.inflight -= 1
                self._send(200, body, 1)

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass  # an edge that stopped mid-hold closed its connection

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


def send_all(srv, targets, headers=""):
    conns = []
    for t in targets:
        c = srv.conn()
        c.send("GET %s HTTP/1.1\r\nHost: test\r\n%s\r\n" % (t, headers))
        conns.append(c)
    return conns


def read_all(conns):
    out = []
    for c in conns:
        out.append(c.read_response())
        c.close()
    return out


def held(srv, n, limit=5):
    """Waits until the edge holds n requests (its /stats)."""
    wait_for(lambda: stats(srv)["llhls"]["held"] >= n, limit, "%d requests held" % n)


def test_mixed_directives_one_upstream_request_per_update():
    """6.2.5.2: viewers holding every mix of directives for one playlist
    (part asked for, order, _HLS_skip, other parameters) are held by the
    edge; the origin sees one blocking request per playlist update, for
    the next part, and nothing more once none is held."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            m = o.first + o.nseg
            first = ["/ll/index.m3u8?_HLS_msn=%d&_HLS_part=0" % m,
                     "/ll/index.m3u8?_HLS_part=0&_HLS_msn=%d" % m,
                     "/ll/index.m3u8?_HLS_msn=%d&_HLS_part=0&_HLS_skip=YES" % m,
                     "/ll/index.m3u8?_HLS_msn=%d&_HLS_part=0&_HLS_foo=1" % m] * 4
            second = ["/ll/index.m3u8?_HLS_msn=%d&_HLS_part=1" % m,
                      "/ll/index.m3u8?_HLS_msn=%d&_HLS_part=1&_HLS_skip=v2" % m] * 4
            c1 = send_all(srv, first)
            c2 = send_all(srv, second)
            held(srv, len(first) + len(second))
            wait_for(lambda: o.counts.get("/ll/index.m3u8?_HLS_msn=%d&_HLS_part=0" % m, 0) == 1, 5,
                     "the blocking request for the next part")
            expect_eq(o.playlist_requests(), 2, "a plain reload for the first copy, one blocking reload")
            # viewers joining (no directives) get the current copy, not the origin
            c = srv.conn()
            for _ in range(5):
                r = c.request("GET", "/ll/index.m3u8")
                expect_eq(r.status, 200, "a plain request")
                expect(r.body == o.text(), "the playlist as it is")
            c.close()
            expect_eq(o.playlist_requests(), 2, "plain requests answered from the edge's copy")
            o.publish()
            r1 = read_all(c1)
            expect(all(r.status == 200 for r in r1), "first wave answered: %r" % r1)
            wait_for(lambda: o.counts.get("/ll/index.m3u8?_HLS_msn=%d&_HLS_part=1" % m, 0) == 1, 5,
                     "the blocking request for the part after")
            o.publish()
            r2 = read_all(c2)
            expect(all(r.status == 200 for r in r2), "second wave answered: %r" % r2)
            for r in r1:
                expect(b"p%d.0.m4s" % m in r.body, "the part asked for is in the answer")
            for r in r2:
                expect(b"p%d.1.m4s" % m in r.body, "the part asked for is in the answer")
            # 6.2.5.1: the delta is the edge's, made from its full copy
            skips = [r for r in r1 + r2 if b"#EXT-X-SKIP:" in r.body]
            expect_eq(len(skips), 8, "every _HLS_skip viewer got a delta")
            expect(all(k not in o.counts for k in o.counts if "_HLS_skip" in k), "no delta asked upstream")
            time.sleep(1.5)  # nobody is held: nothing goes upstream
            upstream = o.playlist_requests()
            expect_eq(upstream, 3, "requests upstream for 24 viewers over 2 updates: %r" % o.counts)
            st = stats(srv)["llhls"]
            expect_eq(st["origin_blocking"], 2, "blocking reloads counted")
    finally:
        o.stop()


def test_poll_origin_without_blocking_reload():
    """6.2.5.2 at the edge: an origin without CAN-BLOCK-RELOAD is polled,
    at most every PART-TARGET/2 (0.25 s here) with one request in flight,
    without directives; the held viewers get the playlist once it holds
    their part."""
    o = LLOrigin(can_block=False).serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            m = o.first + o.nseg
            conns = send_all(srv, ["/ll/index.m3u8?_HLS_msn=%d&_HLS_part=0" % m] * 5)
            held(srv, 5)
            t0 = time.monotonic()
            time.sleep(2.0)
            polls = o.playlist_requests()
            elapsed = time.monotonic() - t0
            expect(polls >= 3, "polled while viewers were held: %d" % polls)
            expect(polls <= elapsed / 0.25 + 2, "at most every PART-TARGET/2: %d in %.1f s" % (polls, elapsed))
            expect_eq(o.max_inflight, 1, "one request in flight")
            expect(all("_HLS_" not in k for k in o.counts), "no directives to such an origin: %r" % o.counts)
            o.publish()
            rs = read_all(conns)
            expect(all(r.status == 200 and b"p%d.0.m4s" % m in r.body for r in rs), "released: %r" % rs)
            time.sleep(1.0)
            after = o.playlist_requests()
            time.sleep(1.0)
            expect_eq(o.playlist_requests(), after, "no polling once none is held")
            expect(stats(srv)["llhls"]["origin_polls"] >= 3, "polls counted")
    finally:
        o.stop()


def test_limits_from_the_copy():
    """6.2.5.2: 400 for an _HLS_msn more than two past the last segment,
    an _HLS_part past the Advance Part Limit, an _HLS_part without
    _HLS_msn, checked against the edge's copy; errors live 1 TD."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            last = o.first + o.nseg - 1
            c = srv.conn()
            r = c.request("GET", "/ll/index.m3u8?_HLS_msn=%d" % last)  # held: the copy comes, it holds it
            expect_eq(r.status, 200, "a segment the copy holds")
            expect_eq(r.h("cache-control"), "max-age=%d" % (6 * TD), "Appendix B.1: blocking, 6 TD")
            expect(r.h("age") is not None, "Age on an answer from the edge's copy")
            for target, why in (("/ll/index.m3u8?_HLS_msn=%d" % (last + 3), "msn past last + 2"),
                                ("/ll/index.m3u8?_HLS_msn=%d&_HLS_part=%d" % (last + 1, 3 / (TD / PARTS) + 1),
                                 "part past the Advance Part Limit"),
                                ("/ll/index.m3u8?_HLS_part=1", "part without msn"),
                                ("/ll/index.m3u8?_HLS_msn=x", "not an integer")):
                n = o.playlist_requests()
                r = c.request("GET", target)
                expect_eq(r.status, 400, why)
                expect_eq(r.h("cache-control"), "max-age=%d" % TD, "Appendix B.1: an error, 1 TD")
                expect_eq(o.playlist_requests(), n, "refused without asking the origin: " + why)
            c.close()
    finally:
        o.stop()


def test_503_after_three_target_durations():
    """6.2.5.2: a request held three target durations without the
    playlist reaching its part gets 503; never an unchanged playlist."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            m = o.first + o.nseg
            c = srv.conn()
            c.request("GET", "/ll/index.m3u8")  # the edge's first copy
            t0 = time.monotonic()
            r = c.request("GET", "/ll/index.m3u8?_HLS_msn=%d&_HLS_part=2" % m)
            took = time.monotonic() - t0
            c.close()
            expect_eq(r.status, 503, "held too long")
            expect(3 * TD - 0.3 <= took <= 3 * TD + 2, "after three target durations: %.2f s" % took)
    finally:
        o.stop()


def test_gzip_answer():
    """Appendix B.1: a held playlist goes out gzip-compressed when asked."""
    import gzip
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            m = o.first + o.nseg
            conns = send_all(srv, ["/ll/index.m3u8?_HLS_msn=%d&_HLS_part=0" % m], "Accept-Encoding: gzip\r\n")
            held(srv, 1)
            o.publish()
            r = read_all(conns)[0]
            expect_eq(r.status, 200, "answered")
            expect_eq(r.h("content-encoding"), "gzip", "compressed")
            expect(gzip.decompress(r.body) == o.text(), "the origin's playlist, whole")
    finally:
        o.stop()


def test_preload_hint_collapsed():
    """6.2.6: requests for the preload hint's URI, whole or an open-ended
    byte range (RFC 8673), are held and collapsed into one origin request,
    and each gets the whole part once it is out."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            m = o.first + o.nseg
            hint = "/ll/p%d.0.m4s" % m
            conns = send_all(srv, [hint] * 6) + send_all(srv, [hint] * 6, "Range: bytes=0-\r\n")
            wait_for(lambda: o.counts.get(hint, 0) >= 1, 5, "the hint asked upstream")
            time.sleep(0.3)
            o.publish()
            rs = read_all(conns)
            body = o.part_body(m, 0)
            for r in rs:
                expect(r.status in (200, 206), "answered: %r" % r)
                expect(r.body == body, "the whole part")
            expect_eq(o.counts.get(hint), 1, "one origin request for twelve")
    finally:
        o.stop()


def test_abandoned_hint_404():
    """6.2.6: a hinted resource that was abandoned gets 404 (the origin's,
    to every request held on the one origin request), with an error's
    TTL of 1 TD (Appendix B.1)."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            m = o.first + o.nseg
            c = srv.conn()
            c.request("GET", "/ll/index.m3u8?_HLS_msn=%d" % (m - 1))  # the edge's copy: TD known
            c.close()
            hint = "/ll/p%d.0.m4s" % m
            conns = send_all(srv, [hint] * 4)
            wait_for(lambda: o.counts.get(hint, 0) >= 1, 5, "the hint asked upstream")
            time.sleep(0.3)
            o.abandon(m, 0)
            for r in read_all(conns):
                expect_eq(r.status, 404, "abandoned")
                expect_eq(r.h("cache-control"), "max-age=%d" % TD, "an error: 1 TD")
            expect_eq(o.counts.get(hint), 1, "one origin request for four")
    finally:
        o.stop()


def test_part_servable_after_it_left():
    """Parts that left the playlist stay servable for three target
    durations: the origin 404s them by then, the edge still has them."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            m = o.first + o.nseg
            o.publish()
            c = srv.conn()
            c.request("GET", "/ll/index.m3u8?_HLS_msn=%d&_HLS_part=0" % m)  # the edge's copy
            r = c.request("GET", "/ll/p%d.0.m4s" % m)
            expect_eq(r.status, 200, "the part while listed")
            # Appendix B.1, in the playlist's target durations
            expect_eq(r.h("cache-control"), "max-age=%d" % (6 * TD), "a part: 6 TD")
            r = c.request("GET", "/ll/index.m3u8")
            expect_eq(r.h("cache-control"), "max-age=%d" % (TD // 2), "a non-blocking playlist: TD/2")
            r = c.request("GET", "/ll/p%d.0.m4s" % (m - 3))
            expect_eq(r.status, 404, "a part that is gone")
            expect_eq(r.h("cache-control"), "max-age=%d" % TD, "an error: 1 TD")
            o.publish(PARTS)  # the segment completes: its parts leave the playlist
            expect_eq(o.part_state(m, 0), "gone", "the origin forgot it")
            t0 = time.monotonic()
            while time.monotonic() - t0 < 3 * TD:
                r = c.request("GET", "/ll/p%d.0.m4s" % m)
                expect_eq(r.status, 200, "servable %.1f s after it left" % (time.monotonic() - t0))
                expect(r.body == o.part_body(m, 0), "the part's bytes")
                time.sleep(1)
            c.close()
            expect_eq(o.counts.get("/ll/p%d.0.m4s" % m), 1, "from the edge's copy")
    finally:
        o.stop()


def test_directives_on_an_ended_playlist():
    """6.2.5.2 and 4.4.3.4: directives on a playlist with EXT-X-ENDLIST are
    ignored: answered at once, whatever they ask, never 400."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            c = srv.conn()
            for t in ("/ll/vod.m3u8?_HLS_msn=999&_HLS_part=0", "/ll/vod.m3u8?_HLS_msn=120&_HLS_part=9"):
                t0 = time.monotonic()
                r = c.request("GET", t)
                expect_eq(r.status, 200, "answered: " + t)
                expect(b"#EXT-X-ENDLIST" in r.body, "the ended playlist")
                expect(time.monotonic() - t0 < 1.5, "not held")
            c.close()
    finally:
        o.stop()


def test_origin_404_for_blocking_reload():
    """Appendix B.1: a blocking reload of a playlist the origin does not
    have is answered 404, for 4 TD of the LL playlist beside it."""
    o = LLOrigin().serve()
    try:
        with Server(ROOT, conf(o.port), workers=1, admin=True) as srv:
            c = srv.conn()
            c.request("GET", "/ll/index.m3u8?_HLS_msn=%d" % (o.first + o.nseg - 1))
            r = c.request("GET", "/ll/missing.m3u8?_HLS_msn=5&_HLS_part=0")
            c.close()
            expect_eq(r.status, 404, "the origin's 404")
            expect_eq(r.h("cache-control"), "max-age=%d" % (4 * TD), "a blocking 404: 4 TD")
    finally:
        o.stop()


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
