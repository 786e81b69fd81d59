"""A real player over HTTP/2 (issue 14): hls.js in headless Chromium plays
a small VOD library (made by ffmpeg) through the edge's TLS listener,
where ALPN offers h2 (RFC 9113 3.2; RFC 7301). Media time advances by at
least 5 s with no error status, and every playlist and segment fetch went
over h2, seen two ways:
  - by the page: PerformanceResourceTiming.nextHopProtocol == "h2". The
    page is on another origin than the edge, so Chromium reports it only
    because the edge sends Timing-Allow-Origin (cors.timing_allow_origin);
  - by the network stack: the DevTools protocol's Network.responseReceived
    (response.protocol == "h2"), whatever the server's headers.
The edge's own counters agree: its requests were h2 streams on TLS
connections that negotiated h2.

Chromium trusts the test certificate through --ignore-certificate-errors
(the certificate is he.make_certs()'s, for 127.0.0.1). Skips (77) when
chromium, npm/hls.js or ffmpeg cannot be had; bounded to about a minute
(ffmpeg a few seconds, then at most PLAY_TIMEOUT)."""

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, run_main  # noqa: E402
from he_player import make_vod_library, statuses, player_or_skip  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-h2-player-")
PLAY_SECONDS = 10  # media time the page waits for
PLAY_TIMEOUT = 35  # wall seconds the page may take


def edge_stats(srv):
    with urllib.request.urlopen("http://127.0.0.1:%d/stats" % srv.admin_port, timeout=5) as r:
        return json.loads(r.read())["http2"]


def kind(url):
    path = url.split("?")[0]
    return "playlist" if path.endswith(".m3u8") else "segment" if path.endswith(".ts") else None


def test_hlsjs_plays_over_h2():
    player = player_or_skip()
    root = os.path.join(TMP, "lib")
    make_vod_library(root)
    extra = 'cors:\n  allow_origin: "*"\n  timing_allow_origin: "*"\n'
    with Server(root, tls=True, admin=True, extra=extra) as srv:
        # the header the page's Resource Timing depends on
        r = srv.conn(tls=True).request("GET", "/master.m3u8")
        expect_eq(r.h("timing-allow-origin"), "*", "Timing-Allow-Origin sent")
        origin = "https://127.0.0.1:%d/" % srv.port
        t0 = time.time()
        res = player.play(origin + "master.m3u8", seconds=PLAY_SECONDS, timeout=PLAY_TIMEOUT,
                          chromium_flags=["--ignore-certificate-errors"], cdp=True)
        took = time.time() - t0
        st = edge_stats(srv)
    timing = [x for x in res.get("resources", []) if x["url"].startswith(origin) and kind(x["url"])]
    network = [x for x in res.get("network", []) if (x["url"] or "").startswith(origin) and kind(x["url"])]
    detail = "why=%s media_time=%.2f hls.js %s, %.1f s; errors %s; timing %s; network %s; cdp_error %s; " \
             "chromium: %s" % (res.get("why"), res.get("media_time") or 0, res.get("hls_version"), took,
                               res.get("errors"), [(x["url"], x["protocol"]) for x in timing],
                               [(x["url"], x["protocol"]) for x in network], res.get("cdp_error"),
                               res["chromium_log"][-800:])
    expect(res["complete"], "the page sent no final report: " + detail)
    expect(res["media_time"] >= 5, "media time advanced %.2f s, wanted >= 5: %s" % (res["media_time"], detail))
    seen = statuses(res, origin)
    expect(seen and all(s < 400 for s in seen), "statuses %s: %s" % (sorted(set(seen)), detail))
    expect(not [e for e in res["errors"] if e.get("type") == "networkError"], "hls.js network errors: " + detail)
    # the page's view: nextHopProtocol for the playlists and the segments
    for k, least in (("playlist", 2), ("segment", 3)):
        got = [x for x in timing if kind(x["url"]) == k]
        expect(len(got) >= least, "%d %s fetches in Resource Timing, wanted >= %d: %s" % (len(got), k, least, detail))
        expect_eq(sorted(set(x["protocol"] for x in got)), ["h2"], "nextHopProtocol of every %s fetch" % k)
    # the network stack's view (DevTools protocol)
    expect(res["cdp_error"] is None, "DevTools session: " + detail)
    for k, least in (("playlist", 2), ("segment", 3)):
        got = [x for x in network if kind(x["url"]) == k]
        expect(len(got) >= least, "%d %s responses in Network.responseReceived: %s" % (len(got), k, detail))
        expect_eq(sorted(set(x["protocol"] for x in got)), ["h2"], "response.protocol of every %s" % k)
        expect(all(x["status"] == 200 for x in got), "%s statuses 200: %s" % (k, detail))
    # the edge's view: h2 over TLS, not h2c, one stream per fetch at least
    expect(st["connections"]["h2"] >= 1 and st["connections"]["h2c"] == 0, "TLS h2 connections: %r" % st)
    expect(st["requests"]["h2"] >= len(network), "h2 requests %r for %d fetches" % (st["requests"], len(network)))
    print("played %.2f s in %.1f s wall (hls.js %s): %d playlist and %d segment fetches over %s; edge: %r" % (
        res["media_time"], took, res["hls_version"], len([x for x in network if kind(x["url"]) == "playlist"]),
        len([x for x in network if kind(x["url"]) == "segment"]), sorted(set(x["protocol"] for x in network)),
        st["connections"]))


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
