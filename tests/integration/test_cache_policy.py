"""What the edge cache may keep and share, through the real binary, against
a raw-socket origin in this file whose answers the tests script:

  - a purge that comes while an origin fill of the key is still
    downloading is not undone when the fill ends: the purge says it found
    the fill, a request after it goes to the origin, and the bytes the fill
    brings are kept in neither tier;
  - a response with Set-Cookie or Vary: * is passed on but not stored
    (the next request goes to the origin); the Set-Cookie never reaches a
    viewer from the cache; a Vary on fields (Origin, User-Agent) is stored,
    as no viewer's header goes to the origin;
  - requests that joined a fill whose response is one viewer's and may
    not be stored (a 403 for a bad token, a private 200) do not get that
    response: each asks the origin itself with its own target
    (hit-for-miss); an answer that is not stored but not personal (a 404
    with no-cache) still goes to all of them from one origin request.

Every wait is bounded."""

import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, blob, expect, expect_eq, run_main  # noqa: E402
from he_admin import admin_get, wait_for  # noqa: E402
from he_rawo import RawOrigin, path_of  # noqa: E402
from he_rawo import cache_conf as conf  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-cache-policy-")
ROOT = os.path.join(TMP, "lib")  # empty: everything comes from the origin
os.makedirs(ROOT, exist_ok=True)


def head(status=200, headers=(), length=None):
    """A raw response head; headers: (name, value) pairs."""
    h = "HTTP/1.1 %d %s\r\n" % (status, {200: "OK", 403: "Forbidden"}.get(status, "X"))
    for k, v in headers:
        h += "%s: %s\r\n" % (k, v)
    if length is not None:
        h += "Content-Length: %d\r\n" % length
    return (h + "Connection: close\r\n\r\n").encode("latin1")


def ScriptOrigin(routes):
    """routes[path](target, headers) -> [(seconds to wait, bytes) ...], by
    the target's path; counts by path."""
    return RawOrigin({p: (lambda req, f=f: f(req[1], req[2])) for p, f in routes.items()}, key=path_of)


def get(srv, target, headers=None):
    c = srv.conn(timeout=30)
    try:
        return c.request("GET", target, headers)
    finally:
        c.close()


def in_thread(fn):
    """Runs fn in a thread; join() returns what it returned (or raises)."""
    out = {}

    def run():
        try:
            out["r"] = fn()
        except Exception as e:  # noqa: BLE001 - handed to the joiner
            out["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join():
        t.join(60)
        expect(not t.is_alive(), "request still running after 60 s")
        if "e" in out:
            raise out["e"]
        return out["r"]
    return join


# ---------------------------------------------------------------- purge vs fill


def test_purge_during_fill():
    """GET a 200 KB segment the origin sends in 2 s; 0.5 s in, the origin
    gets new bytes and the key is purged. The purge answers "purged" (it
    found the fill), a GET right after it goes to the origin and gets the
    new bytes, the first GET still gets the old bytes whole, and once both
    fills are over the cache serves the new bytes, from RAM and, with an
    object over cache.ram_object_max, from the SSD tier (before: the purge
    said "not cached", the second GET joined the fill and got the old
    bytes, and the fill published them when it ended)."""
    path = "/live/seg_1.ts"
    old, new = blob(200000, 1), blob(200000, 2)
    cur = {"body": old}

    def route(target, hdrs):
        body = cur["body"]
        h = head(200, [("Content-Type", "video/mp2t"), ("Cache-Control", "max-age=3600")], len(body))
        if body is not old:
            return [(0, h + body)]
        step = len(body) // 20  # the old bytes come slowly: 2 s
        return [(0, h)] + [(0.1, body[i:i + step]) for i in range(0, len(body), step)]

    for tier in ("ram", "ssd"):
        cur["body"] = old
        store = os.path.join(TMP, "ssd-purge-fill-" + tier)
        os.makedirs(store, exist_ok=True)
        extra = "  ram_object_max: 64k\n" if tier == "ssd" else ""
        with ScriptOrigin({path: route}) as o, \
                Server(ROOT, extra=conf(o, ssd=store, extra_cache=extra), admin=True) as srv:
            first = in_thread(lambda: get(srv, path))
            wait_for(lambda: o.count(path) == 1, 10, "%s: the first fill began" % tier)
            time.sleep(0.5)
            cur["body"] = new
            r = admin_get(srv, "/purge?path=" + path, method="POST")
            expect_eq((r.status, r.body), (200, b"purged\n"), "%s: purge during the fill" % tier)
            r = get(srv, path)
            expect(r.status == 200 and r.body == new,
                   "%s: a GET after the purge got %s" % (tier, "the old bytes" if r.body == old else r))
            expect_eq(o.count(path), 2, "%s: origin requests after the purge" % tier)
            r = first()
            expect(r.status == 200 and r.body == old, "%s: the GET before the purge: %r" % (tier, r))
            time.sleep(0.3)
            wait_for(lambda: not os.listdir(os.path.join(store, "tmp")), 20, "%s: SSD writes over" % tier)
            for i in range(2):
                r = get(srv, path)
                expect(r.status == 200 and r.body == new,
                       "%s: after the fills (%d): %s" % (tier, i, "the purged bytes" if r.body == old else r))
            expect_eq(o.count(path), 2, "%s: origin requests at the end" % tier)


# ---------------------------------------------------------------- what is stored


def test_not_stored_set_cookie_vary():
    """Each path is fetched twice; the origin counts its requests. With
    Set-Cookie or Vary: * the second GET goes to the origin too (before:
    both were stored, and the second viewer got the first one's response
    from the cache); with a Vary on fields, or none, it is a hit: the edge
    asks the origin the same way for every viewer."""
    cases = {
        "/c/cookie.ts": ([("Set-Cookie", "sid=viewer1; Path=/")], 2),
        "/c/vary-star.ts": ([("Vary", "*")], 2),
        "/c/vary-star-list.ts": ([("Vary", "Origin"), ("Vary", "*")], 2),
        "/c/vary-ua.ts": ([("Vary", "User-Agent")], 1),
        "/c/vary-list.ts": ([("Vary", "Accept-Encoding, Origin")], 1),
        "/c/vary-two-lines.ts": ([("Vary", "Accept-Encoding"), ("Vary", "Cookie")], 1),
        "/c/vary-ae.ts": ([("Vary", "Accept-Encoding")], 1),
        "/c/plain.ts": ([], 1),
    }

    def route_for(path):
        def route(target, hdrs):
            body = b"body of " + path.encode()
            h = [("Content-Type", "video/mp2t"), ("Cache-Control", "public, max-age=3600")]
            return [(0, head(200, h + cases[path][0], len(body)) + body)]
        return route

    with ScriptOrigin({p: route_for(p) for p in cases}) as o, Server(ROOT, extra=conf(o)) as srv:
        for path, (_, want) in cases.items():
            for i in range(2):
                r = get(srv, path, {"User-Agent": "viewer%d" % i})
                expect(r.status == 200 and r.body == b"body of " + path.encode(), "%s: %r" % (path, r))
                expect(r.h("set-cookie") is None, "%s: a Set-Cookie went to a viewer" % path)
            expect_eq(o.count(path), want, "%s: origin requests for two GETs" % path)


# ---------------------------------------------------------------- hit-for-miss


def test_not_storable_not_coalesced():
    """Requests that differ only in a parameter the key leaves out (the
    token) arrive while one origin request is under way (the origin waits
    0.5 s before its head). When the answer may not be stored, each must
    get its own: a 403 for the bad token must not reach the viewer with
    the good one, nor the good one's private 200 a viewer with another
    token (before: every joined request got the first one's response)."""
    def tokens(target, hdrs):
        tok = target.split("token=", 1)[1]
        if tok.startswith("bad"):
            status, cc, body = 403, "no-store", b"forbidden for " + tok.encode()
        elif tok.startswith("gone"):
            status, cc, body = 404, "no-cache", b"not yet"
        elif tok.startswith("own"):
            status, cc, body = 200, "private, max-age=60", b"private for " + tok.encode()
        else:
            status, cc, body = 200, "max-age=3600", b"public bytes"
        h = head(status, [("Content-Type", "video/mp2t"), ("Cache-Control", cc)], len(body))
        return [(0.5, h + body)]

    cases = [
        # (path, tokens in arrival order, what each must get, origin requests)
        ("/t/a.ts", ["bad1", "good", "bad2"],
         [(403, b"forbidden for bad1"), (200, b"public bytes"), (403, b"forbidden for bad2")], 3),
        ("/t/b.ts", ["own1", "own2"], [(200, b"private for own1"), (200, b"private for own2")], 2),
        # a storable answer is shared as before: one origin request
        ("/t/c.ts", ["good", "bad3"], [(200, b"public bytes"), (200, b"public bytes")], 1),
        # not stored but not personal: a live segment not produced yet
        ("/t/d.ts", ["gone1", "gone2", "gone3"], [(404, b"not yet")] * 3, 1),
    ]
    with ScriptOrigin({c[0]: tokens for c in cases}) as o, Server(ROOT, extra=conf(o)) as srv:
        for path, toks, want, requests in cases:
            joins = []
            for i, tok in enumerate(toks):
                joins.append(in_thread(lambda t=tok: get(srv, "%s?token=%s" % (path, t))))
                if i == 0:
                    wait_for(lambda: o.count(path) == 1, 10, "%s: the first origin request" % path)
                time.sleep(0.1)
            expect_eq(o.count(path), 1, "%s: one origin request while the first is under way" % path)
            got = [(r.status, r.body) for r in (j() for j in joins)]
            expect_eq(got, want, "%s: what each viewer got" % path)
            expect_eq(o.count(path), requests, "%s: origin requests" % path)


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
