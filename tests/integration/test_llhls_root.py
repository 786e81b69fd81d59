"""Low-Latency HLS from root through the real binary (issue 17).

A small packager in this file writes a live LL-HLS media playlist into
root the way a local packager does (a temporary file renamed into place,
or rewritten in place), with tiny fake .m4s parts, and the tests ask the
edge for it with the delivery directives of draft-pantos-hls-rfc8216bis
6.2.5. Holding is checked without timing the server: a held request has
no answer while the file does not hold what it asks for, and has one once
the test writes it. Every loop is bounded in count and time."""

import gzip
import os
import re
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Conn, Server, expect, expect_eq, run_main  # noqa: E402
from he_admin import metric_sum, metrics_text, parse_metrics, reload_and_wait, stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-llhls-root-")
ROOT = os.path.join(TMP, "lib")
os.makedirs(os.path.join(ROOT, "ll"), exist_ok=True)


class LLPlaylist:
    """A live LL-HLS playlist: complete segments of `parts` parts each,
    and the parts of the segment in progress; write() publishes it."""

    def __init__(self, name, first=100, segments=8, parts=4, td=2.0, skip_until=12.0,
                 ended=False, daterange=True):
        self.path = os.path.join(ROOT, "ll", name)
        self.url = "/ll/" + name
        self.first, self.nseg, self.pps, self.td = first, segments, parts, td
        self.part_target = td / parts
        self.skip_until = skip_until
        self.cur = 0  # parts of the segment in progress
        self.ended = ended
        self.daterange = daterange

    @property
    def last_msn(self):
        return self.first + self.nseg - 1

    def part_uri(self, msn, i):
        return "%s.p%d.%d.m4s" % (os.path.basename(self.path)[:-5], msn, i)

    def text(self):
        pt = self.part_target
        out = ["#EXTM3U", "#EXT-X-VERSION:6", "#EXT-X-TARGETDURATION:%d" % self.td,
               "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=%.1f,"
               "CAN-SKIP-DATERANGES=YES,PART-HOLD-BACK=%.3f" % (self.skip_until, 3 * pt),
               "#EXT-X-PART-INF:PART-TARGET=%.3f" % pt,
               "#EXT-X-MEDIA-SEQUENCE:%d" % self.first, '#EXT-X-MAP:URI="init.mp4"']
        if self.daterange:
            out.append('#EXT-X-DATERANGE:ID="ad-%d",START-DATE="2026-01-01T00:00:00Z"' % self.first)
        for k in range(self.nseg):
            msn = self.first + k
            if k >= self.nseg - 3:  # parts of the last three segments
                for i in range(self.pps):
                    out.append('#EXT-X-PART:DURATION=%.3f,URI="%s"%s' %
                               (pt, self.part_uri(msn, i), ",INDEPENDENT=YES" if i == 0 else ""))
            out += ["#EXTINF:%.3f," % self.td, "s%d.m4s" % msn]
        nxt = self.first + self.nseg
        for i in range(self.cur):
            out.append('#EXT-X-PART:DURATION=%.3f,URI="%s"' % (pt, self.part_uri(nxt, i)))
        if self.ended:
            out.append("#EXT-X-ENDLIST")
        else:
            out.append('#EXT-X-PRELOAD-HINT:TYPE=PART,URI="%s"' % self.part_uri(nxt, self.cur))
        return ("\n".join(out) + "\n").encode()

    def write(self, in_place=False):
        data = self.text()
        nxt = self.first + self.nseg
        for i in range(self.cur):  # the parts exist before the playlist names them
            p = os.path.join(os.path.dirname(self.path), self.part_uri(nxt, i))
            if not os.path.exists(p):
                with open(p, "wb") as f:
                    f.write(b"\0" * 188)
        if in_place:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        else:
            tmp = self.path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.rename(tmp, self.path)

    def add_part(self, in_place=False):
        """One more part; the segment completes with its last part."""
        self.cur += 1
        if self.cur == self.pps:
            self.cur = 0
            self.nseg += 1
            self.first += 1  # a sliding window
        self.write(in_place)


def get(srv, url, headers=None):
    c = srv.conn()
    try:
        return c.request("GET", url, headers)
    finally:
        c.close()


def max_age(r):
    m = re.match(r"max-age=(\d+)$", r.h("cache-control") or "")
    return int(m.group(1)) if m else None


def held(c, wait=0.6):
    """True when c has no answer after wait seconds (the request is held)."""
    c.sock.settimeout(wait)
    try:
        d = c.sock.recv(1, socket.MSG_PEEK)
        return False  # an answer (or a close) is there
    except (socket.timeout, TimeoutError):
        return True
    finally:
        c.sock.settimeout(10)


def start_held(srv, url, headers=None):
    c = srv.conn()
    h = "GET %s HTTP/1.1\r\nHost: test\r\n" % url
    for k, v in (headers or {}).items():
        h += "%s: %s\r\n" % (k, v)
    c.send(h + "\r\n")
    return c


def test_blocking_part():
    """6.2.5.2: _HLS_msn=M&_HLS_part=N is held until the playlist holds part
    N of segment M, then answered whole from that copy; Appendix B.1: a
    blocking answer's TTL is 6 target durations."""
    pl = LLPlaylist("part.m3u8")
    pl.cur = 1
    pl.write()
    with Server(ROOT, workers=1) as srv:
        nxt = pl.last_msn + 1
        r = get(srv, "%s?_HLS_msn=%d&_HLS_part=0" % (pl.url, nxt))  # there already
        expect_eq(r.status, 200, "a part the file holds")
        expect(pl.part_uri(nxt, 0).encode() in r.body, "answered from the file")
        expect_eq(max_age(r), 12, "6 TD for a blocking answer")
        c = start_held(srv, "%s?_HLS_msn=%d&_HLS_part=1" % (pl.url, nxt))
        expect(held(c), "held while the file lacks part 1")
        pl.add_part()  # renamed into place: IN_MOVED_TO
        r = c.read_response()
        c.close()
        expect_eq(r.status, 200, "released")
        expect(pl.part_uri(nxt, 1).encode() in r.body, "the new copy, holding part 1")
        expect(r.body == pl.text(), "whole, as the file is")
        expect_eq(max_age(r), 12, "6 TD")
        expect_eq(r.h("vary"), "Accept-Encoding", "Vary")


def test_part_past_segment_end():
    """6.2.5.2: a part index past the last part of its segment is part 0 of
    the next segment."""
    pl = LLPlaylist("pastend.m3u8")
    pl.write()  # last segment complete, nothing of the next yet
    with Server(ROOT, workers=1) as srv:
        m = pl.last_msn
        r = get(srv, "%s?_HLS_msn=%d&_HLS_part=3" % (pl.url, m))
        expect_eq(r.status, 200, "the last part of a complete segment")
        c = start_held(srv, "%s?_HLS_msn=%d&_HLS_part=4" % (pl.url, m))
        expect(held(c), "part 4 of a 4-part segment waits for part 0 of the next")
        pl.add_part()
        r = c.read_response()
        c.close()
        expect_eq(r.status, 200, "released")
        expect(pl.part_uri(m + 1, 0).encode() in r.body, "by part 0 of the next segment")


def test_blocking_segment_in_place():
    """6.2.5.2: _HLS_msn alone waits for the whole segment; a part of it is
    not enough (never an unchanged or not-yet-holding playlist). The
    packager here rewrites the file in place: IN_CLOSE_WRITE releases."""
    pl = LLPlaylist("inplace.m3u8")
    pl.write(in_place=True)
    with Server(ROOT, workers=1, admin=True) as srv:
        want = pl.last_msn + 1
        c = start_held(srv, "%s?_HLS_msn=%d" % (pl.url, want))
        expect(held(c), "held")
        for _ in range(3):  # parts 0..2 of segment `want`: still held
            pl.add_part(in_place=True)
            expect(held(c, 0.4), "held while segment %d is in progress (%d parts)" % (want, pl.cur))
        pl.add_part(in_place=True)  # the segment completes
        r = c.read_response()
        c.close()
        expect_eq(r.status, 200, "released")
        expect(b"s%d.m4s" % want in r.body, "the complete segment")
        st = stats(srv)
        expect(st["llhls"]["held"] >= 1 and st["llhls"]["released"] >= 1, "counted: %r" % st["llhls"])
        expect(st["llhls"]["events"] >= 4, "from inotify events: %r" % st["llhls"])


def test_one_write_releases_all():
    """All held requests of a playlist go on the one event that updates it,
    whatever mix of directives they hold."""
    pl = LLPlaylist("many.m3u8")
    pl.write()
    with Server(ROOT, workers=1, admin=True) as srv:
        nxt = pl.last_msn + 1
        urls = ["%s?_HLS_msn=%d&_HLS_part=0" % (pl.url, nxt)] * 8 + \
               ["%s?_HLS_msn=%d&_HLS_part=0&_HLS_skip=YES" % (pl.url, nxt)] * 4 + \
               ["%s?_HLS_msn=%d&_HLS_part=4" % (pl.url, nxt - 1)] * 4
        conns = [start_held(srv, u) for u in urls]
        wait_for(lambda: stats(srv)["llhls"]["held"] >= len(urls), 5, "all held")
        expect(all(held(c, 0.05) for c in conns), "all held")
        pl.add_part()
        for u, c in zip(urls, conns):
            r = c.read_response()
            c.close()
            expect_eq(r.status, 200, u)
            expect(pl.part_uri(nxt, 0).encode() in r.body, "%s: the new copy" % u)
        st = stats(srv)["llhls"]
        expect_eq(st["released"], len(urls), "released together")
        expect_eq(st["timeouts"], 0, "none timed out")


def test_errors():
    """6.2.5.2: 400 for _HLS_msn more than two past the last segment, for
    _HLS_part past the Advance Part Limit (3 / PART-TARGET = 6 parts at
    0.5 s), for _HLS_part without _HLS_msn, for a value that is no
    decimal-integer; Appendix B.1: an error's TTL is one target duration."""
    pl = LLPlaylist("errors.m3u8")
    pl.cur = 1
    pl.write()
    with Server(ROOT, workers=1) as srv:
        last, nxt = pl.last_msn, pl.last_msn + 1
        for q, what in (("_HLS_msn=%d" % (last + 3), "msn > last + 2"),
                        ("_HLS_msn=%d&_HLS_part=7" % nxt, "7 parts ahead"),
                        ("_HLS_msn=%d&_HLS_part=3" % (nxt + 1), "7 parts ahead, next segment"),
                        ("_HLS_part=1", "part without msn"),
                        ("_HLS_msn=abc", "not a number"),
                        ("_HLS_msn=1&_HLS_part=-1", "a negative part")):
            r = get(srv, "%s?%s" % (pl.url, q))
            expect_eq(r.status, 400, what)
            expect_eq(max_age(r), 2, "%s: 1 TD" % what)
        # within the limits: held, not refused (msn last + 2; part 6 ahead)
        for q in ("_HLS_msn=%d" % (last + 2), "_HLS_msn=%d&_HLS_part=6" % nxt):
            c = start_held(srv, "%s?%s" % (pl.url, q))
            expect(held(c, 0.3), "%s is held" % q)
            c.close()


def test_hold_times_out():
    """6.2.5.2: 503 after holding for three target durations (TD 1 s here);
    its TTL is one target duration (Appendix B.1)."""
    pl = LLPlaylist("timeout.m3u8", td=1.0, parts=2, skip_until=6)
    pl.write()
    with Server(ROOT, workers=1, admin=True) as srv:
        t0 = time.monotonic()
        c = start_held(srv, "%s?_HLS_msn=%d" % (pl.url, pl.last_msn + 2))
        c.sock.settimeout(15)
        r = c.read_response()
        c.close()
        waited = time.monotonic() - t0
        expect_eq(r.status, 503, "nothing came")
        expect(waited >= 2.5, "held about three target durations, not %.2f s" % waited)
        expect_eq(max_age(r), 1, "1 TD")
        expect_eq(stats(srv)["llhls"]["timeouts"], 1, "counted")
        m = parse_metrics(metrics_text(srv))
        expect_eq(metric_sum(m, "hlsedge_llhls_timeouts_total"), 1, "in /metrics")
        expect_eq(metric_sum(m, "hlsedge_llhls_held_total"), 1, "held, in /metrics")


def test_delta_updates():
    """4.4.5.2, 6.2.5.1: _HLS_skip=YES on a playlist with CAN-SKIP-UNTIL is
    answered with EXT-X-SKIP made from the edge's full copy: segments that
    end CAN-SKIP-UNTIL (12 s = 6 segments) or more before the end are
    skipped; section 8: EXT-X-VERSION 9, and 10 for v2 whose
    RECENTLY-REMOVED-DATERANGES comes along and whose date ranges go."""
    pl = LLPlaylist("delta.m3u8", segments=10)
    pl.cur = 2
    pl.write()
    with Server(ROOT, workers=1) as srv:
        r = get(srv, pl.url + "?_HLS_skip=YES")
        expect_eq(r.status, 200, "delta")
        body = r.body.decode()
        expect("#EXT-X-SKIP:SKIPPED-SEGMENTS=4\n" in body, "skips 4 of 10 segments: %s" % body)
        expect("#EXT-X-VERSION:9\n" in body and "#EXT-X-VERSION:6" not in body, "version 9")
        expect("s%d.m4s" % (pl.first + 3) not in body and "s%d.m4s" % (pl.first + 4) in body, "kept")
        expect("#EXT-X-MEDIA-SEQUENCE:%d\n" % pl.first in body, "the full playlist's sequence")
        expect('#EXT-X-MAP:URI="init.mp4"' in body, "the map in force stays")
        expect('ID="ad-%d"' % pl.first in body, "YES keeps date ranges")
        expect(pl.part_uri(pl.last_msn + 1, 1) in body, "the parts in progress")
        expect_eq(max_age(r), 1, "a non-blocking playlist: TD/2")
        r = get(srv, pl.url + "?_HLS_skip=v2&_HLS_msn=%d&_HLS_part=1" % (pl.last_msn + 1))
        body = r.body.decode()
        expect("#EXT-X-SKIP:SKIPPED-SEGMENTS=4,RECENTLY-REMOVED-DATERANGES=\"\"\n" in body, body)
        expect("#EXT-X-VERSION:10\n" in body, "version 10 for v2")
        expect('ID="ad-' not in body, "v2 skips date ranges")
        expect_eq(max_age(r), 12, "blocking: 6 TD")
        r = get(srv, pl.url)
        expect(r.body == pl.text(), "without _HLS_skip: the whole file")


def test_endlist_ignores_directives():
    """6.2.5: directives on a playlist with EXT-X-ENDLIST are ignored: the
    file is served as it is, at once, even for an msn it will never have."""
    pl = LLPlaylist("ended.m3u8", ended=True)
    pl.write()
    with Server(ROOT, workers=1) as srv:
        for q in ("_HLS_msn=%d" % (pl.last_msn + 1), "_HLS_msn=99999", "_HLS_part=3",
                  "_HLS_skip=YES"):
            r = get(srv, "%s?%s" % (pl.url, q))
            expect_eq(r.status, 200, q)
            expect(r.body == pl.text(), "%s: the file as it is" % q)


def test_gzip():
    """Playlists go gzip-compressed to a client that accepts gzip (RFC 9110
    12.5.3), with Vary: Accept-Encoding; others get identity."""
    pl = LLPlaylist("gz.m3u8", segments=10)
    pl.write()
    with Server(ROOT, workers=1) as srv:
        r = get(srv, pl.url, {"Accept-Encoding": "br, gzip;q=0.8"})
        expect_eq(r.status, 200, "gzip")
        expect_eq(r.h("content-encoding"), "gzip", "Content-Encoding")
        expect_eq(r.h("vary"), "Accept-Encoding", "Vary")
        expect(gzip.decompress(r.body) == pl.text(), "the playlist, compressed")
        expect(len(r.body) < len(pl.text()), "smaller")
        r = get(srv, pl.url + "?_HLS_skip=YES", {"Accept-Encoding": "gzip"})
        expect(b"#EXT-X-SKIP" in gzip.decompress(r.body), "a delta, compressed")
        for ae in (None, "gzip;q=0", "identity"):
            r = get(srv, pl.url, {"Accept-Encoding": ae} if ae else None)
            expect(r.h("content-encoding") is None, "%s: identity" % ae)
            expect(r.body == pl.text(), "%s: as the file" % ae)


def test_follows_file_exactly():
    """From root a live playlist follows the file within one segment
    (draft-pantos-hls-rfc8216bis 6.2.2: a client reloads every target
    duration, so an edge a segment late makes it stall): the
    worker's inotify watch makes the fd cache forget a replaced playlist at
    once, well before its revalidation (fd_cache.valid 5 s here, and
    cache.live_fraction 100 % of a 10 s target duration)."""
    pl = LLPlaylist("follow.m3u8", td=10.0, parts=1)
    pl.write()
    extra = "fd_cache:\n  valid: 5s\ncache:\n  live_fraction: 100\n"
    with Server(ROOT, extra, workers=1) as srv:
        c = srv.conn()
        try:
            for _ in range(3):
                want = pl.last_msn + 1
                expect(b"s%d.m4s" % (want - 1) in c.request("GET", pl.url).body, "cached")
                pl.add_part()
                deadline, body = time.monotonic() + 3.0, b""
                while time.monotonic() < deadline and b"s%d.m4s" % want not in body:
                    time.sleep(0.05)
                    body = c.request("GET", pl.url).body
                expect(b"s%d.m4s" % want in body, "segment %d seen within 3 s" % want)
        finally:
            c.close()


def test_preload_hint():
    """6.2.6: a request for the URI of EXT-X-PRELOAD-HINT is held until the
    packager has written that part, then served whole; Appendix B.1: parts
    and segments of an LL playlist get 6 TD."""
    pl = LLPlaylist("hint.m3u8")
    pl.cur = 1
    pl.write()
    with Server(ROOT, workers=1, admin=True) as srv:
        nxt = pl.last_msn + 1
        expect_eq(get(srv, pl.url).status, 200, "the playlist, naming the hint")
        r = get(srv, "/ll/" + pl.part_uri(nxt, 0))
        expect_eq(r.status, 200, "a part that is there")
        expect_eq(max_age(r), 12, "a part: 6 TD")
        hinted = "/ll/" + pl.part_uri(nxt, 1)
        c = start_held(srv, hinted)
        expect(held(c), "the hinted part is held while it is not written")
        other = get(srv, "/ll/" + pl.part_uri(nxt, 3))
        expect_eq(other.status, 404, "a missing part that is no hint: 404 at once")
        pl.add_part()  # writes part 1, then the playlist hinting part 2
        r = c.read_response()
        c.close()
        expect_eq(r.status, 200, "released by the part's write")
        expect_eq(len(r.body), 188, "the whole part")
        expect_eq(max_age(r), 12, "6 TD")


def test_blocking_404():
    """Appendix B.1: a blocking playlist request that finds no playlist
    gets 404 cached for 4 TD (TD of the LL playlist beside it); a plain
    request for it keeps the plain 404."""
    pl = LLPlaylist("here.m3u8")
    pl.write()
    with Server(ROOT, workers=1) as srv:
        expect_eq(get(srv, pl.url).status, 200, "an LL playlist in the directory")
        r = get(srv, "/ll/gone.m3u8?_HLS_msn=5&_HLS_part=1")
        expect_eq(r.status, 404, "no such playlist")
        expect_eq(max_age(r), 8, "4 TD")
        r = get(srv, "/ll/gone.m3u8")
        expect_eq(r.status, 404, "plain")
        expect(max_age(r) != 8, "not the blocking TTL")


def test_abandoned_hint():
    """A hinted part that never comes gets 404 (after three target
    durations, 1 s here), with the TTL of an error (1 TD)."""
    pl = LLPlaylist("abandon.m3u8", td=1.0, parts=2, skip_until=6)
    pl.write()
    with Server(ROOT, workers=1, admin=True) as srv:
        expect_eq(get(srv, pl.url).status, 200, "the playlist")
        c = start_held(srv, "/ll/" + pl.part_uri(pl.last_msn + 1, 0))
        expect(held(c, 0.5), "held")
        c.sock.settimeout(15)
        r = c.read_response()
        c.close()
        expect_eq(r.status, 404, "abandoned")
        expect_eq(max_age(r), 1, "1 TD")


def test_client_gone_while_held():
    """Clients that went away while held (HTTP/1.1: the connection is not
    read while it waits for its answer, so their answer is what finds the
    close) do not keep the others on the playlist from being released."""
    pl = LLPlaylist("gone.m3u8")
    pl.write()
    with Server(ROOT, workers=1, admin=True) as srv:
        url = "%s?_HLS_msn=%d&_HLS_part=0" % (pl.url, pl.last_msn + 1)
        conns = [start_held(srv, url) for _ in range(4)]
        wait_for(lambda: stats(srv)["llhls"]["held"] >= 4, 5, "all held")
        for c in conns[:3]:
            c.close()
        time.sleep(0.2)
        pl.add_part()
        r = conns[3].read_response()
        conns[3].close()
        expect_eq(r.status, 200, "the one left")
        expect_eq(get(srv, pl.url).status, 200, "still serving")
        # the three answers found their connections closed, and those went
        wait_for(lambda: stats(srv)["connections"]["active"] == 0, 5, "the closed ones went")
        expect_eq(stats(srv)["llhls"]["timeouts"], 0, "none left to time out")


def h2_client(port):
    try:
        import h2.config
        import h2.connection
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import h2.config  # noqa: F811
            import h2.connection  # noqa: F811
        except ImportError:
            return None
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    c = h2.connection.H2Connection(config=cfg)
    c.initiate_connection()
    sock.sendall(c.data_to_send())
    return sock, c


def h2_get(sock, c, path):
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                         (":authority", "127.0.0.1")], end_stream=True)
    sock.sendall(c.data_to_send())
    return sid


def h2_pump(sock, c, until, wait):
    import h2.events
    got = {}
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not until(got):
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = sock.recv(1 << 16)
        except (socket.timeout, TimeoutError):
            break
        if not data:
            break
        for e in c.receive_data(data):
            sid = getattr(e, "stream_id", None)
            st = got.setdefault(sid, {"headers": {}, "body": b"", "ended": False})
            if isinstance(e, h2.events.ResponseReceived):
                st["headers"] = dict(e.headers)
            elif isinstance(e, h2.events.DataReceived):
                st["body"] += e.data
                c.acknowledge_received_data(e.flow_controlled_length, sid)
            elif isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                st["ended"] = True
        sock.sendall(c.data_to_send())
    return got


def test_http2_held():
    """Over HTTP/2 a held stream is released like a request, and one the
    client reset (RST_STREAM) or whose connection closed is dropped."""
    pl = LLPlaylist("h2.m3u8")
    pl.write()
    with Server(ROOT, "http2:\n  h2c: true\n", workers=1, admin=True) as srv:
        cl = h2_client(srv.port)
        if cl is None:
            print("  skipped: python3-h2 not installed")
            return
        sock, c = cl
        nxt = pl.last_msn + 1
        url = "%s?_HLS_msn=%d&_HLS_part=0" % (pl.url, nxt)
        a, b = h2_get(sock, c, url), h2_get(sock, c, url + "&_HLS_skip=YES")
        d = h2_get(sock, c, url + "&_HLS_skip=YES")
        gone = h2_client(srv.port)
        h2_get(gone[0], gone[1], url)
        wait_for(lambda: stats(srv)["llhls"]["held"] >= 4, 5, "held")
        got = h2_pump(sock, c, lambda g: False, 0.4)
        expect(not got.get(a, {}).get("ended") and not got.get(b, {}).get("ended"), "held: %r" % got)
        c.reset_stream(b)
        sock.sendall(c.data_to_send())
        gone[0].close()
        time.sleep(0.2)
        pl.add_part()
        got = h2_pump(sock, c, lambda g: g.get(a, {}).get("ended") and g.get(d, {}).get("ended"), 5)
        st = got.get(a, {})
        expect(b"#EXT-X-SKIP" in got.get(d, {}).get("body", b""), "a delta on a stream beside it")
        expect_eq(st.get("headers", {}).get(":status"), "200", "released over HTTP/2")
        expect(st.get("body") == pl.text(), "whole, from the new copy")
        expect_eq(st.get("headers", {}).get("cache-control"), "max-age=12", "6 TD")
        expect_eq(stats(srv)["llhls"]["released"], 2, "the reset and the closed one were dropped")
        sock.close()


def test_shutdown_while_held():
    """SIGTERM with requests held: they get 503 (or their connection
    closes) rather than waiting out three target durations, and the
    worker reaps its inotify read before it stops."""
    pl = LLPlaylist("shutdown.m3u8", td=6.0, skip_until=36)
    pl.write()
    srv = Server(ROOT, workers=1, admin=True).start()
    try:
        c = start_held(srv, "%s?_HLS_msn=%d" % (pl.url, pl.last_msn + 1))
        wait_for(lambda: stats(srv)["llhls"]["held"] >= 1, 5, "held")
        t0 = time.monotonic()
        srv.stop()  # raises on a non-zero exit or a sanitizer report
        expect(time.monotonic() - t0 < 15, "stopped without waiting out the hold (18 s)")
        try:
            c.sock.settimeout(5)
            r = c.read_response()
            expect_eq(r.status, 503, "the held request on shutdown")
        except (EOFError, ConnectionError):
            pass  # closed by the drain: as good
        c.close()
    finally:
        if srv.proc and srv.proc.poll() is None:
            srv.proc.kill()


def test_new_workers_while_watching():
    """A reload that starts new workers retires the old ones while their
    inotify read is on the ring and a request is held: the held one is
    still answered by the next write, the new workers watch on their own,
    and the old ones stop cleanly (the harness checks the log for
    sanitizer reports and stale completions)."""
    pl = LLPlaylist("reload.m3u8")
    pl.write()
    with Server(ROOT, workers=1, admin=True) as srv:
        nxt = pl.last_msn + 1
        c = start_held(srv, "%s?_HLS_msn=%d&_HLS_part=0" % (pl.url, nxt))
        wait_for(lambda: stats(srv)["llhls"]["held"] >= 1, 5, "held")
        with open(srv.conf) as f:
            conf = f.read()
        with open(srv.conf, "w") as f:
            f.write(re.sub(r"(?m)^workers: \d+$", "workers: 2", conf))
        reload_and_wait(srv, 2)
        pl.add_part()
        r = c.read_response()
        c.close()
        expect_eq(r.status, 200, "the held request, answered by the old worker")
        wait_for(lambda: stats(srv)["config"]["server_generations"] == 1, 15, "old generation gone")
        c = start_held(srv, "%s?_HLS_msn=%d&_HLS_part=1" % (pl.url, nxt))
        expect(held(c), "held by a new worker")
        pl.add_part()
        r = c.read_response()
        c.close()
        expect(r.status == 200 and pl.part_uri(nxt, 1).encode() in r.body, "released by a new worker")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
