"""The edge cache through the real binary: long request-targets, purges
that race an SSD write, stale-if-error for objects only on the SSD tier.

  - a request-target of 2048 bytes or more reaches the origin as the
    viewer sent it (escapes and every query parameter, a signature token
    included), also one larger than the fetch's 16 KiB send buffer;
  - a purge answered while the object's SSD write is still running is not
    undone by that write: the next request goes to the origin (100 KB and
    16 MB objects, purged right after the response);
  - a purge survives a kill -9 right after its answer: the restarted edge
    rebuilds its SSD index without the purged object;
  - POST /purge?path= takes a '+' in the path as a '+' (a path is not a
    form field), and %2B alike;
  - an expired object within its stale-if-error window that is only on
    the SSD tier (the edge restarted) is served stale when the origin is
    down, as one in RAM is.

Every wait is bounded."""

import http.client
import http.server
import os
import socketserver
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, blob, expect, expect_eq, run_main  # noqa: E402
from he_admin import stats, wait_for  # noqa: E402
from origin import Origin  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-cache-ps-")
ROOT = os.path.join(TMP, "lib")  # empty: everything comes from the origin
os.makedirs(ROOT, exist_ok=True)


def cache_conf(origin_url, ssd=None, extra_cache="", extra=""):
    y = "cache:\n  ram_size: 64m\n  prefetch: 0\n  admission: false\n"
    if ssd:
        y += '  ssd: ["%s:256m"]\n' % ssd
    y += extra_cache
    y += 'origin:\n  urls: ["%s"]\n  retries: 0\n  connect_timeout: 1s\n' % origin_url
    y += "  read_timeout: 5s\n  total_timeout: 30s\n" + extra
    return y


def get(port, path, method="GET", body=None, timeout=30):
    """(status, body, complete)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        try:
            return r.status, r.read(), True
        except http.client.IncompleteRead as e:
            return r.status, e.partial, False
    except (ConnectionError, http.client.RemoteDisconnected) as e:
        return None, repr(e).encode(), False
    finally:
        c.close()


# ---------------------------------------------------------------- long targets


class _RecHandler(http.server.BaseHTTPRequestHandler):
    """Records every raw request-target; serves a path (decoded once, as an
    origin's file system would see it) only when its query carries the
    token it was put with."""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        o = self.server.rec
        with o.lock:
            o.targets.append(self.path)
        u = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(u.path)
        q = urllib.parse.parse_qs(u.query)
        want = o.files.get(path)
        if want is None:
            status, body = 404, b"not found\n"
        elif q.get("token") != [want[0]]:
            status, body = 403, b"bad token\n"
        else:
            status, body = 200, want[1]
        self.send_response(status)
        self.send_header("Content-Type", "video/mp2t")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600" if status == 200 else "no-store")
        self.end_headers()
        self.wfile.write(body)


class _RecServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    block_on_close = False


class RecOrigin:
    def __init__(self, files):
        self.files = files  # decoded path -> (token, body)
        self.targets = []
        self.lock = threading.Lock()
        self.srv = _RecServer(("127.0.0.1", 0), _RecHandler)
        self.srv.rec = self
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]

    def __enter__(self):
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()

    def seen(self):
        with self.lock:
            return list(self.targets)


def _token(n, seed):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return "".join(alphabet[(i * 7 + seed) % len(alphabet)] for i in range(n))


def test_long_target_sent_raw():
    """Targets of 2048 bytes and more: the origin gets exactly what the
    viewer sent (before: the target was rebuilt from the cache key, so the
    token was dropped (403), an escaped '%' was decoded into another file,
    and an escaped space made a request that could not be sent (502))."""
    tok = _token(2100, 1)
    big = _token(40000, 2)  # more than the fetch's 16 KiB send buffer
    files = {
        "/file9.ts": (tok, b"signed file9"),
        "/file%20x.ts": (tok, b"the file named with a percent sign"),
        "/file x.ts": (tok, b"the file named with a space (wrong one)"),
        "/file y.ts": (tok, b"file y"),
        "/big.ts": (big, blob(30000, 3)),
    }
    targets = [
        ("/file9.ts?token=%s&lang=en" % tok, files["/file9.ts"][1]),
        ("/file%%2520x.ts?token=%s" % tok, files["/file%20x.ts"][1]),
        ("/file%%20y.ts?token=%s" % tok, files["/file y.ts"][1]),
        ("/big.ts?a=1&token=%s&z=2" % big, files["/big.ts"][1]),
    ]
    extra = "limits:\n  uri_bytes: 65536\n  header_bytes: 131072\n"
    with RecOrigin(files) as o:
        with Server(ROOT, extra=extra + cache_conf(o.url)) as srv:
            for t, want in targets:
                expect(len(t) >= 2048, "target of %d bytes" % len(t))
                st, body, ok = get(srv.port, t)
                expect_eq((st, ok), (200, True), "status for a %d-byte target %s..." % (len(t), t[:20]))
                expect(body == want, "body for %s...: %r" % (t[:20], body[:40]))
                expect_eq(o.seen()[-1], t, "the target the origin got for %s..." % t[:20])
            expect_eq(len(o.seen()), len(targets), "origin requests")
            # the token is not part of the key: another one is a hit
            st, body, ok = get(srv.port, "/file9.ts?token=%s&lang=en" % _token(3000, 5))
            expect(st == 200 and body == files["/file9.ts"][1], "a cached copy for another token")
            expect_eq(len(o.seen()), len(targets), "origin requests after a hit")


# ---------------------------------------------------------------- purge vs SSD write


def test_purge_during_ssd_write():
    """GET, then at once POST /purge (the SSD write of the object is still
    running), then GET: the second GET must come from the origin, with
    the new bytes (before: the write indexed its file after the purge, and
    the old bytes came back as HIT-SSD)."""
    store = os.path.join(TMP, "ssd-purge-race")
    os.makedirs(store, exist_ok=True)
    sizes = [16 << 20] * 3 + [100000] * 3
    files = {"/race/seg_%d.ts" % i: blob(n, 20 + i) for i, n in enumerate(sizes)}
    with Origin(files=files) as o:
        for p, d in files.items():
            if len(d) > 1 << 20:
                # the client keeps up with the fill, so it has the last byte
                # (and purges) right after the fill ended and its write began
                o.behave(p, rate=48 << 20)
        conf = cache_conf(o.url, ssd=store, extra_cache="  ram_object_max: 32m\n")
        with Server(ROOT, extra=conf, admin=True) as srv:
            for i, (path, old) in enumerate(sorted(files.items())):
                new = blob(len(old), 100 + i)  # before: the purge must come at once
                st, body, ok = get(srv.port, path, timeout=60)
                expect(st == 200 and ok and body == old, "%s: first fetch" % path)
                o.put(path, new)
                st, answer, _ = get(srv.admin_port, "/purge?path=" + path, method="POST")
                expect_eq((st, answer), (200, b"purged\n"), "%s: purge answer" % path)
                time.sleep(0.3)
                wait_for(lambda: not os.listdir(os.path.join(store, "tmp")), 20,
                         "%s: the SSD write over" % path)
                st, body, ok = get(srv.port, path, timeout=60)
                expect(st == 200 and ok, "%s: after the purge" % path)
                expect(body == new, "%s: the purged bytes came back (%s, %d bytes)" %
                       (path, "old" if body == old else "other", len(body)))
                expect_eq(o.count(path), 2, "%s: origin requests" % path)
            # nothing stale is left on disk either: one file per object
            wait_for(lambda: sum(f.endswith(".obj") for _, _, fs in os.walk(store) for f in fs) == len(files),
                     10, "one store file per object")


# ---------------------------------------------------------------- purge vs kill -9


def test_purge_survives_kill_9():
    """Objects on the SSD tier, purged (admin POST /purge and PURGE on the
    viewer port), then SIGKILL right after the answers; the restarted edge
    rebuilds its index from the directory and must not serve a purged
    object (before: the file was only queued for an unlink on the ring, so
    it was still there and came back as HIT-SSD)."""
    import signal
    store = os.path.join(TMP, "ssd-kill9")
    os.makedirs(store, exist_ok=True)
    files = {"/k9/seg_%d.ts" % i: blob(200000 + i, 70 + i) for i in range(6)}
    with Origin(files=files) as o:
        conf = cache_conf(o.url, ssd=store)
        srv = Server(ROOT, extra=conf, admin=True).start()
        try:
            for p, d in files.items():
                st, body, ok = get(srv.port, p)
                expect(st == 200 and ok and body == d, "%s: first fetch" % p)
            wait_for(lambda: sum(f.endswith(".obj") for _, _, fs in os.walk(store) for f in fs) == len(files),
                     10, "every object written to the SSD tier")
            purged = sorted(files)[:4]
            for i, p in enumerate(purged):
                if i % 2:
                    st, _, _ = get(srv.port, p, method="PURGE")
                else:
                    st, _, _ = get(srv.admin_port, "/purge?path=" + p, method="POST")
                expect_eq(st, 200, "%s: purge" % p)
            srv.proc.send_signal(signal.SIGKILL)
            srv.proc.wait()
        finally:
            if srv.proc.poll() is None:
                srv.proc.kill()
                srv.proc.wait()
            srv.log.close()
        for p in files:
            o.put(p, blob(len(files[p]), 90))
        with Server(ROOT, extra=conf, admin=True) as srv:
            for p in sorted(files):
                st, body, ok = get(srv.port, p)
                expect(st == 200 and ok, "%s: after the restart (%s)" % (p, st))
                if p in purged:
                    expect(body != files[p], "%s: the purged bytes came back after kill -9" % p)
                    expect_eq(o.count(p), 2, "%s: from the origin again" % p)
                else:
                    expect(body == files[p], "%s: kept on the SSD tier" % p)
                    expect_eq(o.count(p), 1, "%s: not asked again" % p)


# ---------------------------------------------------------------- purge ?path= with '+'


def test_purge_query_plus_is_a_plus():
    """A path with '+' is cached under '+'; ?path= must purge that one
    (before: the query was read as a form, '+' as a space, and the purge
    answered 404 not cached), and %2B spells the same path."""
    files = {"/plus/a+b.ts": blob(5000, 60), "/plus/c+d.ts": blob(6000, 61), "/plus/e f.ts": blob(700, 62)}
    with Origin(files=files) as o:
        with Server(ROOT, extra=cache_conf(o.url), admin=True) as srv:
            for p in ("/plus/a+b.ts", "/plus/c+d.ts", "/plus/e%20f.ts"):
                st, body, ok = get(srv.port, p)
                expect(st == 200 and ok, "%s: first fetch (%s)" % (p, st))
            st, answer, _ = get(srv.admin_port, "/purge?path=/plus/a+b.ts", method="POST")
            expect_eq((st, answer), (200, b"purged\n"), "'+' in ?path=")
            st, answer, _ = get(srv.admin_port, "/purge?path=/plus/c%2Bd.ts", method="POST")
            expect_eq((st, answer), (200, b"purged\n"), "%2B in ?path=")
            st, answer, _ = get(srv.admin_port, "/purge?path=/plus/e%20f.ts", method="POST")
            expect_eq((st, answer), (200, b"purged\n"), "%20 in ?path= is a space")
            st, answer, _ = get(srv.admin_port, "/purge?path=/plus/a+b.ts", method="POST")
            expect_eq((st, answer), (404, b"not cached\n"), "purged already")
            for p in ("/plus/a+b.ts", "/plus/c+d.ts"):
                st, body, ok = get(srv.port, p)
                expect(st == 200 and body == files[p], p)
                expect_eq(o.count(p), 2, "%s: from the origin again" % p)


# ---------------------------------------------------------------- stale-if-error on SSD


def test_stale_if_error_from_ssd():
    """Expired but within stale-if-error, origin down: the RAM copy is
    served stale (as before), and so is a copy that is only on the SSD
    tier after a restart (before: 502)."""
    store = os.path.join(TMP, "ssd-sie")
    os.makedirs(store, exist_ok=True)
    a, b = blob(100000, 40), blob(300000, 41)
    with Origin(files={"/sie/a.ts": a, "/sie/b.ts": b}, cache_control="max-age=1") as o:
        conf = cache_conf(o.url, ssd=store, extra_cache="  stale_if_error: 60s\n  stale_while_revalidate: 0s\n")
        srv = Server(ROOT, extra=conf, admin=True).start()
        try:
            for p, d in (("/sie/a.ts", a), ("/sie/b.ts", b)):
                st, body, ok = get(srv.port, p)
                expect(st == 200 and ok and body == d, "%s: first fetch" % p)
            wait_for(lambda: sum(f.endswith(".obj") for _, _, fs in os.walk(store) for f in fs) == 2, 10,
                     "both objects written to the SSD tier")
            time.sleep(2.5)  # expired now, well inside stale-if-error
            o.down()
            st, body, ok = get(srv.port, "/sie/a.ts")
            expect_eq(st, 200, "RAM copy, origin down")
            expect(ok and body == a, "RAM copy body")
        finally:
            srv.stop()
        with Server(ROOT, extra=conf, admin=True) as srv:  # RAM empty: /sie/b.ts is on SSD only
            st, body, ok = get(srv.port, "/sie/b.ts")
            expect_eq(st, 200, "SSD copy, origin down")
            expect(ok and body == b, "SSD copy body")
            c = wait_for(lambda: (lambda c: c if c["stale_serves"] >= 1 else None)(stats(srv)["cache"]), 5,
                         "the stale serve counted")
            expect_eq(c["stale_serves"], 1, "stale serves")
            # a HEAD is answered from the same stale copy
            st, _, _ = get(srv.port, "/sie/b.ts", method="HEAD")
            expect_eq(st, 200, "HEAD of the SSD copy, origin down")
        o.up()
        expect_eq(o.count("/sie/b.ts"), 1, "origin requests for /sie/b.ts (it was down)")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
