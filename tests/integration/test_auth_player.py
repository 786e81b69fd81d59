"""hls.js in Chromium plays a tokenised master through the edge while an
auth rule requires the token on every path (issue 15): media time advances
by at least 5 s, no request is answered 403 (or any other error), and every
media playlist and segment the player fetched carried the token that came
only on the master's URL (propagation). The library is a small real one
made by ffmpeg (two renditions, H.264 + AAC in MPEG-TS, 2 s segments).

Skips (77) when chromium, npm/hls.js or ffmpeg cannot be had; bounded to
well under 60 s (ffmpeg a few seconds, then at most PLAY_TIMEOUT)."""

import os
import shutil
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, run_main  # noqa: E402
from he_player import make_vod_library, statuses, player_or_skip  # noqa: E402
from he_token import edgeauth  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-auth-player-")
KEY = "6b2c1f0e9d8a7b6c5d4e3f2a1b0c9d8e"
PLAY_SECONDS = 10  # media time the page waits for
PLAY_TIMEOUT = 35  # wall seconds the page may take


def test_hlsjs_plays_tokenised_master():
    player = player_or_skip()
    root = os.path.join(TMP, "lib")
    make_vod_library(root)
    tok = edgeauth(KEY, exp=int(time.time()) + 600, acl="/*")
    q = "__token__=" + urllib.parse.quote(tok, safe="")
    rule = 'auth:\n  - prefix: /\n    keys: ["%s"]\n    propagate: true\n' % KEY
    with Server(root, admin=True, extra=rule) as srv:
        # the rule holds everywhere: without the token, 403
        expect_eq(srv.get("/240p/seg_00000.ts").status, 403, "a segment without the token")
        expect_eq(srv.get("/240p/index.m3u8").status, 403, "a media playlist without the token")
        master = "http://127.0.0.1:%d/master.m3u8?%s" % (srv.plain_port, q)
        t0 = time.time()
        r = player.play(master, seconds=PLAY_SECONDS, timeout=PLAY_TIMEOUT)
        took = time.time() - t0
    origin = "http://127.0.0.1:%d/" % srv.plain_port
    edge = [x for x in r.get("resources", []) if x["url"].startswith(origin)]
    detail = "why=%s media_time=%.2f hls.js %s, %.1f s; errors %s; requests %s; chromium: %s" % (
        r.get("why"), r.get("media_time") or 0, r.get("hls_version"), took, r.get("errors"),
        [(x["url"].split("?")[0], x["status"]) for x in edge], r["chromium_log"][-800:])
    expect(r["complete"], "the page sent no final report: " + detail)
    expect(r["media_time"] >= 5, "media time advanced %.2f s, wanted >= 5: %s" % (r["media_time"], detail))
    seen = statuses(r, origin)
    expect(403 not in seen, "a 403 was seen: " + detail)
    expect(all(s < 400 for s in seen), "an error status was seen %s: %s" % (sorted(set(seen)), detail))
    expect(not [e for e in r["errors"] if e.get("type") == "networkError"], "hls.js network errors: " + detail)
    # what the player fetched from the edge, by resource timing
    media = [x for x in edge if x["url"].split("?")[0].endswith("/index.m3u8")]
    segs = [x for x in edge if x["url"].split("?")[0].endswith(".ts")]
    expect(media, "no media playlist requested: " + detail)
    expect(len(segs) >= 3, "only %d segments requested: %s" % (len(segs), detail))
    for x in media + segs:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(x["url"]).query)
        expect_eq(query.get("__token__"), [tok], "the token on " + x["url"].split("?")[0])
        if x["status"] is not None:
            expect_eq(x["status"], 200, "status of " + x["url"].split("?")[0])
    # hls.js saw the same loads succeed
    frags = [l for l in r["loads"] if l["kind"] == "fragment"]
    expect(len(frags) >= 3 and all("__token__=" in (l["url"] or "") for l in frags),
           "hls.js fragment loads with the token: %s" % frags)
    print("played %.2f s in %.1f s wall (hls.js %s): %d media playlist and %d segment requests, statuses %s, "
          "protocols %s" % (r["media_time"], took, r["hls_version"], len(media), len(segs), sorted(set(seen)),
                            sorted(set(str(x["protocol"]) for x in edge))))


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
