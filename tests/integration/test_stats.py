"""Statistics through the real binary: a known request mix must show up
exactly in /stats and /metrics; /metrics passes promtool; the admin
listener's routes, methods and errors."""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from he import TLS, Server, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import admin_get, metric_sum, metrics_text, parse_metrics, stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-stats-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)

# (method, path, expected status, expected kind)
MIX = [
    ("GET", "/master.m3u8", 200, "master"),
    ("GET", "/288p/index.m3u8", 200, "media"),
    ("GET", "/360p/index.m3u8", 200, "media"),
    ("GET", "/288p/seg_00000.ts", 200, "segment"),
    ("GET", "/360p/seg_00001.ts", 200, "segment"),
    ("GET", "/misc/aes.key", 200, "other"),
    ("GET", "/misc/blob.bin", 200, "other"),
    ("HEAD", "/master.m3u8", 200, "master"),
    ("HEAD", "/288p/seg_00001.ts", 200, "segment"),
    ("HEAD", "/misc/subs.vtt", 200, "segment"),
    ("GET", "/no/such.ts", 404, "other"),
    ("GET", "/nope.m3u8", 404, "other"),
    ("DELETE", "/master.m3u8", 405, "other"),
    ("OPTIONS", "/master.m3u8", 204, "other"),
    ("OPTIONS", "*", 204, "other"),
]


def snapshot(srv):
    s = stats(srv)
    return s


def test_known_mix_exact():
    with Server(ROOT, workers=2, admin=True) as srv:
        # The harness's readiness probe is one connection without a request.
        wait_for(lambda: stats(srv)["connections"]["active"] == 0, what="idle server")
        before = snapshot(srv)
        c = srv.conn()
        wire = 0
        for method, path, status, _ in MIX:
            r = c.request(method, path)
            expect_eq(r.status, status, "%s %s" % (method, path))
            wire += len(r.raw_head) + 4 + len(r.body)
        c.close()
        n = len(MIX)
        after = wait_for(lambda: (lambda s: s if s["connections"]["active"] == 0 and
                                  s["latency_us"]["total"]["count"] - before["latency_us"]["total"]["count"] == n
                                  else None)(snapshot(srv)), what="counters to settle")

        def d(*keys):
            a, b = after, before
            for k in keys:
                a, b = a[k], b[k]
            return a - b

        expect_eq(d("requests", "total"), n, "requests")
        expect_eq(d("requests", "GET"), 9, "GET")
        expect_eq(d("requests", "HEAD"), 3, "HEAD")
        expect_eq(d("requests", "OPTIONS"), 2, "OPTIONS")
        expect_eq(d("requests", "other"), 1, "other methods")
        expect_eq(d("responses", "2xx"), 12, "2xx")
        expect_eq(d("responses", "4xx"), 3, "4xx")
        for k in ("1xx", "3xx", "5xx"):
            expect_eq(d("responses", k), 0, k)
        for kind in ("master", "media", "segment", "other"):
            expect_eq(d("kinds", kind), sum(1 for m in MIX if m[3] == kind), "kind " + kind)
        expect_eq(d("bytes_out"), wire, "bytes out = bytes the client read")
        expect_eq(d("connections", "accepted"), 1, "accepted")
        expect_eq(d("connections", "closed"), 1, "closed")
        expect_eq(after["connections"]["active"], 0, "active")
        expect_eq(d("connections", "refused"), 0, "refused")
        for k, v in after["errors"].items():
            expect_eq(v - before["errors"][k], 0, "errors." + k)
        expect_eq(d("latency_us", "ttfb", "count"), n, "ttfb count")
        lat = after["latency_us"]["total"]
        expect(0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"], "quantiles ordered")
        expect(lat["p99.9"] < 5_000_000, "loopback latency under 5 s")
        expect_eq(len(after["workers"]), 2, "per-worker entries")
        expect_eq(sum(w["requests"]["total"] for w in after["workers"]), after["requests"]["total"],
                  "workers sum to the total")
        for k in ("io_uring", "ktls", "numa_nodes", "summary"):
            expect(k in after["features"], "features." + k)
        expect_eq(after["config"]["generation"], 1, "generation")
        expect_eq(after["config"]["file"], srv.conf, "config file")
        expect(after["uptime_s"] > 0, "uptime")
        for w in ("1s", "10s"):
            expect("gbps" in after["throughput"][w] and "rps" in after["throughput"][w], "throughput " + w)

        # /metrics: the same figures (absolute; nothing else ran).
        m = parse_metrics(metrics_text(srv))
        expect_eq(metric_sum(m, "hlsedge_requests_total"), after["requests"]["total"], "requests_total")
        expect_eq(metric_sum(m, "hlsedge_requests_total", method="GET"), after["requests"]["GET"], "GET")
        expect_eq(metric_sum(m, "hlsedge_requests_total", method="HEAD"), after["requests"]["HEAD"], "HEAD")
        expect_eq(metric_sum(m, "hlsedge_requests_total", method="OPTIONS"), 2, "OPTIONS")
        expect_eq(metric_sum(m, "hlsedge_requests_total", method="other"), 1, "other")
        expect_eq(metric_sum(m, "hlsedge_responses_total", status_class="2xx"), 12, "2xx")
        expect_eq(metric_sum(m, "hlsedge_responses_total", status_class="4xx"), 3, "4xx")
        expect_eq(metric_sum(m, "hlsedge_sent_bytes_total"), after["bytes_out"], "sent bytes")
        expect_eq(metric_sum(m, "hlsedge_responses_by_kind_total", kind="segment"), 4, "segments")
        expect_eq(metric_sum(m, "hlsedge_connections_active"), 0, "active")
        expect_eq(metric_sum(m, "hlsedge_connections_accepted_total"), after["connections"]["accepted"], "accepted")
        expect_eq(metric_sum(m, "hlsedge_ttfb_seconds_count"), after["latency_us"]["ttfb"]["count"], "ttfb count")
        expect_eq(metric_sum(m, "hlsedge_response_seconds_bucket", le="+Inf"), after["latency_us"]["total"]["count"],
                  "+Inf bucket")
        buckets = [(float(l["le"]), v) for n_, l, v in m if n_ == "hlsedge_response_seconds_bucket" and l["le"] != "+Inf"]
        expect(all(buckets[i][1] <= buckets[i + 1][1] for i in range(len(buckets) - 1)), "cumulative buckets")
        # the one connection of the mix, over TLS when the suite runs with HE_TLS=1
        expect_eq(metric_sum(m, "hlsedge_tls_connections_total"), 1 if TLS else 0, "TLS connections")
        expect_eq(metric_sum(m, "hlsedge_config_generation"), 1, "generation")
        workers = {l["worker"] for n_, l, v in m if n_ == "hlsedge_requests_total"}
        expect_eq(workers, {"0", "1"}, "worker labels")


def test_promtool_accepts_metrics():
    promtool = shutil.which("promtool")
    if not promtool:
        print("SKIP promtool check: promtool not installed (Debian package prometheus)")
        return
    with Server(ROOT, workers=2, admin=True) as srv:
        c = srv.conn()
        for p in ("/master.m3u8", "/288p/seg_00000.ts", "/nope"):
            c.request("GET", p)
        c.close()
        text = metrics_text(srv)
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
        expect_eq(p.returncode, 0, "promtool check metrics: %s%s" % (p.stdout.decode(), p.stderr.decode()))
        for line in text.splitlines():
            if line.startswith("# TYPE"):
                expect(line.split()[2].startswith("hlsedge_"), "metric prefix: " + line)


def test_admin_routes():
    with Server(ROOT, admin=True) as srv:
        r = admin_get(srv, "/healthz")
        expect_eq(r.status, 200, "/healthz")
        expect_eq(r.body, b"ok\n")
        r = admin_get(srv, "/")
        expect_eq(r.status, 200, "dashboard")
        expect(r.h("content-type").startswith("text/html"), "dashboard type")
        expect(b"<canvas" in r.body and b"/stats" in r.body, "dashboard page")
        expect(b"http://" not in r.body and b"https://" not in r.body, "no external assets")
        r = admin_get(srv, "/metrics")
        expect(r.h("content-type").startswith("text/plain; version=0.0.4"), "metrics type")
        r = admin_get(srv, "/stats", method="HEAD")
        expect_eq(r.status, 200, "HEAD /stats")
        expect_eq(r.body, b"", "HEAD has no body")
        expect_eq(admin_get(srv, "/nope").status, 404, "unknown path")
        r = admin_get(srv, "/stats", method="POST")
        expect_eq(r.status, 405, "POST /stats")
        expect("GET" in r.h("allow"), "Allow header")
        # keep-alive: several requests on one connection
        from he import Conn
        c = Conn(srv.admin_port, tls=False)
        for _ in range(3):
            expect_eq(c.request("GET", "/healthz").status, 200, "keep-alive")
        c.send(b"GARBAGE\r\n\r\n")
        expect_eq(c.read_response().status, 400, "malformed request")
        expect(c.closed_by_peer(2), "closed after 400")
        # the data listener knows nothing of the admin routes
        expect_eq(srv.get("/stats").status, 404, "/stats on the data port")


def test_admin_off_by_default_in_harness():
    with Server(ROOT) as srv:
        expect_eq(srv.get("/master.m3u8").status, 200)
        expect("admin on" not in srv.read_log(), "no admin listener when admin.listen is off")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
