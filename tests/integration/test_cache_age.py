"""The Age header on answers from the edge cache, through the real binary
(RFC 9111 5.1 and 4.2.3: a cache sends Age on every response it serves from
storage, the seconds since the origin generated it; issue 17 asks for it
because hls.js tunes in to live from it).

  - a RAM hit carries Age, and it grows with the time the object has been
    stored;
  - an SSD hit (the edge restarted, RAM empty) carries the age since the
    origin's response, not since the SSD read;
  - a stale serve (expired, origin down, within stale-if-error) from RAM
    and from SSD carries an Age past the object's max-age;
  - a HEAD and a 304 from the cache carry it too.

The tier that answered is checked from /stats. Every wait is bounded."""

import http.client
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, blob, expect, expect_eq, run_main  # noqa: E402
from he_admin import stats, wait_for  # noqa: E402
from origin import Origin  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-cache-age-")
ROOT = os.path.join(TMP, "lib")  # empty: everything comes from the origin
os.makedirs(ROOT, exist_ok=True)


def cache_conf(origin_url, ssd):
    return ("cache:\n  ram_size: 64m\n  prefetch: 0\n  admission: false\n"
            '  ssd: ["%s:256m"]\n  stale_if_error: 60s\n  stale_while_revalidate: 0s\n'
            'origin:\n  urls: ["%s"]\n  retries: 0\n  connect_timeout: 1s\n'
            "  read_timeout: 5s\n  total_timeout: 30s\n" % (ssd, origin_url))


def get(port, path, method="GET", headers=None):
    """(status, headers lower-cased, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def age(h, what):
    expect("age" in h, "%s: no Age header: %s" % (what, h))
    v = h["age"]
    expect(v.isdigit(), "%s: Age is delta-seconds (RFC 9111 5.1), got %r" % (what, v))
    return int(v)


def tier_hits(srv):
    t = stats(srv)["cache"]["tiers"]
    return t["ram"]["hits"], t["ssd"]["hits"]


def test_age_ram_ssd_stale():
    store = os.path.join(TMP, "ssd")
    os.makedirs(store, exist_ok=True)
    fresh, short = blob(100000, 70), blob(120000, 71)
    with Origin(files={"/age/fresh.ts": fresh, "/age/short.ts": short}, cache_control="max-age=3600") as o:
        o.behave("/age/short.ts", cache_control="max-age=1")
        conf = cache_conf(o.url, store)
        srv = Server(ROOT, extra=conf, admin=True).start()
        try:
            t_fetch = time.time()
            for p, d in (("/age/fresh.ts", fresh), ("/age/short.ts", short)):
                st, _, body = get(srv.port, p)
                expect(st == 200 and body == d, "%s: first fetch (%s)" % (p, st))
            wait_for(lambda: sum(f.endswith(".obj") for _, _, fs in os.walk(store) for f in fs) == 2, 10,
                     "both objects written to the SSD tier")

            # RAM hits: Age counts the time stored, and grows
            time.sleep(2.2)
            ram0, _ = tier_hits(srv)
            st, h, body = get(srv.port, "/age/fresh.ts")
            expect(st == 200 and body == fresh, "RAM hit")
            a1 = age(h, "RAM hit")
            expect(2 <= a1 <= 2 + int(time.time() - t_fetch), "RAM hit Age %d after ~2 s" % a1)
            time.sleep(1.1)
            st, h, _ = get(srv.port, "/age/fresh.ts", method="HEAD")
            a2 = age(h, "RAM hit, HEAD")
            expect(st == 200 and a2 >= a1 + 1, "Age grows: %d then %d" % (a1, a2))
            st, h, _ = get(srv.port, "/age/fresh.ts", headers={"If-None-Match": h.get("etag", '"x"')})
            expect_eq(st, 304, "conditional hit")
            expect(age(h, "304 from the cache") >= a2, "304 Age")
            ram1, _ = tier_hits(srv)
            expect(ram1 >= ram0 + 3, "RAM answered: hits %d -> %d" % (ram0, ram1))

            # stale from RAM: max-age=1, the origin down, within stale-if-error
            o.down()
            st, h, body = get(srv.port, "/age/short.ts")
            expect(st == 200 and body == short, "stale RAM copy, origin down (%s)" % st)
            a = age(h, "stale serve from RAM")
            expect(a >= 3, "stale RAM Age %d is past max-age=1 (stored %.1f s ago)" % (a, time.time() - t_fetch))
            o.up()
        finally:
            srv.stop()

        # RAM empty: both objects on SSD only
        time.sleep(1.0)
        with Server(ROOT, extra=conf, admin=True) as srv:
            _, ssd0 = tier_hits(srv)
            st, h, body = get(srv.port, "/age/fresh.ts")
            expect(st == 200 and body == fresh, "SSD hit")
            elapsed = time.time() - t_fetch
            a = age(h, "SSD hit")
            expect(int(elapsed) - 1 <= a <= int(elapsed) + 1,
                   "SSD hit Age %d is the time since the origin's answer (%.1f s)" % (a, elapsed))
            _, ssd1 = tier_hits(srv)
            expect_eq(ssd1, ssd0 + 1, "SSD answered")
            o.down()
            st, h, body = get(srv.port, "/age/short.ts")
            expect(st == 200 and body == short, "stale SSD copy, origin down (%s)" % st)
            a = age(h, "stale serve from SSD")
            expect(a >= int(time.time() - t_fetch) - 1, "stale SSD Age %d" % a)
            c = stats(srv)["cache"]
            expect(c["stale_serves"] >= 1, "the stale serve counted: %s" % c["stale_serves"])
            o.up()
        expect_eq(o.count("/age/fresh.ts"), 1, "origin requests for /age/fresh.ts")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
