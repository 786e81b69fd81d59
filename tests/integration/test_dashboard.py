"""The dashboard in headless Chromium: hlsedge serves GET / on the admin
listener; under a bounded loopback load the page, polling /stats, must
show live non-zero figures in its charts, and with the cache on, each
tier's hit ratio as /stats has it. Exits 77 (skip) without
Chromium. HE_DASHBOARD_SHOT=FILE also saves a screenshot there (how
docs/dashboard.png is made, with HE_DASHBOARD_LOAD_S=60 for a fuller
history)."""

import html.parser
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Conn, Server, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import stats, wait_for  # noqa: E402
from origin import Origin  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TMP = tempfile.mkdtemp(prefix="he-dash-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
LOAD_S = float(os.environ.get("HE_DASHBOARD_LOAD_S", "3"))


class Attrs(html.parser.HTMLParser):
    """Attributes of every element that has an id."""

    def __init__(self):
        super().__init__()
        self.by_id = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.by_id[a["id"]] = a


def chromium(url, *extra, budget_ms=5000):
    profile = tempfile.mkdtemp(prefix="he-chromium-", dir=TMP)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", "--user-data-dir=" + profile, "--window-size=1400,1100",
           "--virtual-time-budget=%d" % budget_ms] + list(extra) + [url]
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError("chromium exited %d: %s" % (p.returncode, p.stderr.decode()[-2000:]))
    return p.stdout.decode()


def load(port, stop, counts, idx):
    """One keep-alive client fetching segments and playlists until stop."""
    rnd = random.Random(idx)
    paths = ["/%s/seg_%05d.ts" % (r, n) for r in ("288p", "360p", "576p") for n in range(4)]
    paths += ["/master.m3u8", "/360p/index.m3u8"]
    c = None
    while not stop.is_set():
        try:
            if c is None:
                c = Conn(port)
            c.request("GET", rnd.choice(paths))
            counts[idx] += 1
            if rnd.random() < 0.02:  # new connections now and then
                c.close()
                c = None
            # a slowly varying rate makes the charts worth looking at
            phase = (time.time() % 20) / 20
            time.sleep(0.0005 + 0.002 * abs(phase - 0.5))
        except OSError:
            c = None
    if c:
        c.close()


def num(a, key="data-value"):
    try:
        return float(a.get(key, "nan"))
    except ValueError:
        return float("nan")


def test_dashboard_shows_live_figures():
    if not CHROMIUM:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(77)
    with Server(ROOT, workers=2, admin=True) as srv:
        stop = threading.Event()
        counts = [0] * 4
        threads = [threading.Thread(target=load, args=(srv.port, stop, counts, i)) for i in range(4)]
        for t in threads:
            t.start()
        try:
            # a few seconds of load: the sampler's 1 s history fills
            time.sleep(LOAD_S)
            wait_for(lambda: stats(srv)["throughput"]["1s"]["gbps"] > 0, 10, "load visible in /stats")
            url = "http://127.0.0.1:%d/" % srv.admin_port
            dom = chromium(url, "--dump-dom")
            shot = os.environ.get("HE_DASHBOARD_SHOT") or os.path.join(TMP, "dashboard.png")
            chromium(url, "--screenshot=" + shot, "--hide-scrollbars", budget_ms=3000)
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        expect(sum(counts) > 0, "load ran")
        p = Attrs()
        p.feed(dom)
        a = p.by_id
        expect(int(a["status"]["data-polls"]) >= 2, "page polled /stats more than once: %r" % a.get("status"))
        expect_eq(a["status"]["data-errors"], "0", "poll errors")
        expect_eq(a["health"]["data-value"], "serving", "health pill")
        expect_eq(a["nworkers"]["data-value"], "2", "workers")
        for chart in ("c-gbps", "c-rps", "c-conns", "c-status", "c-p99"):
            expect(int(a[chart]["data-points"]) >= 2, "%s has a history: %r" % (chart, a[chart]))
        expect(num(a["c-gbps"], "data-last") > 0, "Gbit/s chart live: %r" % a["c-gbps"])
        expect(num(a["c-rps"], "data-last") > 0, "req/s chart live: %r" % a["c-rps"])
        expect(num(a["c-conns"], "data-last") >= 1, "active connections chart: %r" % a["c-conns"])
        expect(num(a["c-status"], "data-last") > 0, "2xx per second: %r" % a["c-status"])
        expect(num(a["v-gbps"]) > 0 and num(a["v-rps"]) > 0, "current figures")
        expect(num(a["v-2xx"]) > 0, "2xx count")
        expect_eq(a["c-workers"]["data-points"], "2", "per-worker chart rows")
        expect(num(a["c-workers"], "data-last") > 0, "per-worker load: %r" % a["c-workers"])
        expect(num(a["q-total-p99"]) >= 0, "p99 shown")
        expect_eq(a["cache"]["data-value"], "n/a", "cache tiers n/a until the cache adds them")
        with open(shot, "rb") as f:
            expect(f.read(8) == b"\x89PNG\r\n\x1a\n", "screenshot is a PNG")


def test_dashboard_shows_cache_hit_ratio():
    """With the cache on: the hit ratio per tier as /stats has it, live."""
    if not CHROMIUM:
        print("SKIP: chromium not installed (apt-get install chromium)")
        return
    empty = os.path.join(TMP, "empty")  # everything comes from the origin
    os.makedirs(empty, exist_ok=True)
    with Origin(files={"/v/seg_1.ts": b"s" * 100000}) as o:
        conf = ("cache:\n  ram_size: 16m\n  admission: false\n"
                'origin:\n  urls: ["%s"]\n  retries: 0\n' % o.url)
        with Server(empty, extra=conf, admin=True) as srv:
            c = Conn(srv.port)
            for _ in range(10):  # one miss, then RAM hits
                expect_eq(c.request("GET", "/v/seg_1.ts").status, 200)
            c.close()
            def ram_tiers():  # one GET /stats per look
                tiers = (stats(srv).get("cache") or {}).get("tiers", {})
                return tiers if tiers.get("ram", {}).get("hits") == 9 else None

            tiers = wait_for(ram_tiers, what="9 RAM hits in /stats")
            ram = tiers["ram"]
            ratio = ram["hits"] / (ram["hits"] + ram["misses"])
            expect(ratio >= 0.9 - 1e-9, "RAM hit ratio in /stats: %r" % ram)
            p = Attrs()
            p.feed(chromium("http://127.0.0.1:%d/" % srv.admin_port, "--dump-dom", budget_ms=3000))
            shown = dict(v.split("=") for v in p.by_id["cache"]["data-value"].split())
            expect(set(shown) >= {"ram"}, "tiers shown: %r" % shown)
            expect(abs(float(shown["ram"]) - ratio) < 1e-3, "RAM hit ratio shown %r, /stats %r" % (shown, ram))
            expect_eq(o.count("/v/seg_1.ts"), 1, "origin requests")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
