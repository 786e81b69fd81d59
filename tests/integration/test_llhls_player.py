"""hls.js (lowLatencyMode: true) in headless Chromium plays the live LL-HLS
source (he_llsource.py: 1 s parts, 4 s segments, two renditions of real
H.264/AAC) through the edge for PLAY_SECONDS (24) of media, and the page
reports hls.js's latency to the live edge (hls.latency, hls.targetLatency):

  - from root: the source writes its files into the edge's root, as a
    local packager does;
  - the same stream as plain live HLS (segments only, no LL tags): the
    latency a non-LL player gets, which LL must beat; not under a
    sanitizer, where it would test the player, not the edge, again;
  - in front of an origin: the source as an HTTP origin that answers
    blocking reloads itself (draft-pantos-hls-rfc8216bis 6.2.5.2), the
    edge's origin: section pointing at it.

Each run must play at least 5/6 of PLAY_SECONDS of media within its
wall-clock budget, without a stall (hls.js bufferStalledError or the
video element's "waiting" event), the newest buffered media under a bound
behind live, and hls.js's latency under that bound plus whatever the
player lost by decoding slower than real time (Chromium on a busy
machine). In LL mode hls.js must aim at PART-HOLD-BACK (its target under
the 3 target durations, 12 s, it holds plain live at) and the bound is
half of those 12 s; plain live's is 30 s. The latencies are printed; the
longer measurement that docs/performance.md ("Low-latency live through
the edge") records is tests/bench/llhls-latency.py, which plays with
these helpers. Nothing here depends on the edge holding blocking
reloads: where it does not hold, hls.js still plays (it reloads the
playlist every part target). HE_LL_PLAY_SECONDS changes the runs' length.

Skips (77) when chromium, npm/hls.js or ffmpeg cannot be had. Bounded:
each run ends at PLAY_SECONDS of media or PLAY_SECONDS + 40 wall seconds."""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import he  # noqa: E402
from he import Server, expect, run_main  # noqa: E402
from he_player import statuses, player_or_skip  # noqa: E402
import he_llsource as ll  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-llhls-player-")
WORK = os.path.join(os.environ.get("HE_SRC") or os.path.join(os.path.dirname(__file__), "..", ".."),
                    "var", "cache", "ll-source")
PLAY_SECONDS = float(os.environ.get("HE_LL_PLAY_SECONDS", "24"))
MAX_STALLS = 0
TARGET_DURATION = 4.0       # the source's: 4 parts of 1 s
# hls.js holds plain live 3 target durations (liveSyncDurationCount)
# behind the edge: 12 s. LL must sit well under it: the goal is under
# 3 s (docs/performance.md); half of it leaves room for a busy machine
PLAIN_TARGET = 3 * TARGET_DURATION
LL_LATENCY_BOUND = PLAIN_TARGET / 2
PLAIN_LATENCY_BOUND = 30.0
ASAN = b"libasan" in subprocess.run(["ldd", he.BIN], capture_output=True).stdout
RESULTS = {}


def setup():
    player = player_or_skip()
    return player, ll.encode_clips(WORK, 1.0, 4, gop=2.0)


def hls_config(ll_mode):
    # hls.js starts targetLatency (PART-HOLD-BACK, or 3 target durations)
    # behind the edge, but whatever the start-up costs adds to that for
    # good unless it may play faster to catch up: live players are set up
    # so, and so are both runs here, LL and plain alike
    return {"lowLatencyMode": ll_mode, "maxLiveSyncPlaybackRate": 1.5}


def play(player, url, what, ll_mode, bound, seconds=PLAY_SECONDS, max_stalls=MAX_STALLS):
    """Plays url for seconds of media, checks the run (see above) and
    records its latency in RESULTS[what]; returns the player's result."""
    t0 = time.time()
    min_played = seconds * 5 / 6
    r = player.play(url, seconds=seconds, timeout=seconds + 40, live=True,
                    hls_config=hls_config(ll_mode))
    took = time.time() - t0
    start = r.get("start_time") or 0
    played = (r.get("media_time") or 0) - start
    stalled = [e for e in r["errors"] if e.get("details") == "bufferStalledError"]
    # latency over the second half of the run, when it has settled
    samples = [p["latency"] for p in r["progress"] if p.get("latency") is not None]
    tail = samples[len(samples) // 2:] or [None]
    median = statistics.median(tail) if tail[0] is not None else None
    target = r.get("target_latency")
    prog = r["progress"]
    began = [p["wall"] for p in prog if p["media_time"] > 0][:1]
    detail = "began at %s s of page wall, last sample %s; " % (began, prog[-1] if prog else None)
    detail += "why=%s played %.1f s in %.1f s wall (hls.js %s), stalls %d, waiting %s, errors %s; chromium: %s" % (
        r.get("why"), played, took, r.get("hls_version"), len(stalled), r.get("waiting"),
        [(e.get("details"), e.get("status")) for e in r["errors"]][:12], r["chromium_log"][-600:])
    expect(r["complete"], "%s: the page sent no final report: %s" % (what, detail))
    expect(played >= min_played, "%s: played %.1f s of media, wanted >= %.0f: %s" % (what, played, min_played,
                                                                                    detail))
    expect(len(stalled) <= max_stalls and (r.get("waiting") or 0) <= max_stalls, "%s: stalls: %s" % (what, detail))
    expect(not [e for e in r["errors"] if e.get("fatal")], "%s: fatal errors: %s" % (what, detail))
    expect(all(s < 400 for s in statuses(r, url.split("/live/")[0])), "%s: error statuses: %s" % (what, detail))
    # What the edge answers for: how far the newest buffered media is behind
    # live (hls.latency less the buffer ahead of the play head). The play
    # head's own latency also grows when Chromium cannot decode in real time
    # on a busy machine: that much (wall time since playback began less the
    # media played, when positive) is not held against the edge.
    edge = [p["latency"] - (p["buffered"] - p["media_time"]) for p in prog if p.get("latency") is not None]
    edge = edge[len(edge) // 2:]
    edge_median = statistics.median(edge) if edge else None
    slow = max(0.0, (prog[-1]["wall"] - began[0]) - played) if prog and began else 0.0
    detail = "buffer edge behind live %s s, player slower than real time by %.1f s; %s" % (
        "%.2f" % edge_median if edge_median is not None else None, slow, detail)
    expect(edge_median is not None and edge_median < bound, "%s: the buffer's edge %s s behind live, bound %s: %s"
           % (what, edge_median, bound, detail))
    expect(median is not None and median < bound + slow, "%s: latency %s s, bound %s + %.1f: %s"
           % (what, median, bound, slow, detail))
    frags = [l for l in r["loads"] if l["kind"] == "fragment"]
    parts = [l for l in frags if l.get("part")]
    if ll_mode:  # hls.js read the LL tags: it aims at PART-HOLD-BACK and loads parts
        expect(target is not None and target < PLAIN_TARGET, "%s: hls.js's target latency %s s, not under "
               "plain live's %.0f s: %s" % (what, target, PLAIN_TARGET, detail))
        expect(parts, "%s: hls.js loaded no parts: %s" % (what, detail))
    # latency less the player's own slowness: what LL vs plain compares
    RESULTS[what] = (median - slow, min(tail), max(tail), target)
    print("  %s: latency %.2f s (median of the second half; %.2f..%.2f), target %s s; the buffer's edge %.2f s "
          "behind live; played %.1f s in %.1f s wall (%.1f s slower than real time), %d stalls, %d fragment loads "
          "(%d parts), hls.js %s"
          % (what, median, min(tail), max(tail), "%.2f" % target if target is not None else "-", edge_median,
             played, took, slow, len(stalled), len(frags), len(parts), r.get("hls_version")))
    return r


def edge_conf():
    # the defaults, but a live playlist from root or an origin may be at
    # most 10 % of its target duration (0.4 s) old: with 1 s parts the
    # default 50 % (2 s) would be two parts
    return "cache:\n  live_fraction: 10\n"


def from_root(player, clips, tmp, ll_bound=LL_LATENCY_BOUND, plain=True, **kw):
    """LL, then (with plain) plain live of the same stream, from root;
    returns plain live's latency less LL's, or None without plain."""
    root = os.path.join(tmp, "root")
    st = ll.Stream(clips, 4, window=10)
    w = ll.FileWriter(st, os.path.join(root, "live")).start()
    try:
        with Server(root, edge_conf()) as srv:
            base = "http://127.0.0.1:%d/live/" % srv.plain_port
            play(player, base + "master.m3u8", "LL from root", True, ll_bound, **kw)
            if plain:
                play(player, base + "master-plain.m3u8", "plain live from root", False, PLAIN_LATENCY_BOUND, **kw)
    finally:
        w.stop()
    if not plain:
        return None
    ll_lat, plain_lat = RESULTS["LL from root"][0], RESULTS["plain live from root"][0]
    expect(ll_lat < plain_lat, "LL (%.2f s, less the player's slowness) beats plain live (%.2f s)"
           % (ll_lat, plain_lat))
    print("  LL saves %.2f s of latency over plain live" % (plain_lat - ll_lat))
    return plain_lat - ll_lat


def from_origin(player, clips, tmp, ll_bound=LL_LATENCY_BOUND, **kw):
    """LL through the edge in front of the blocking-reload origin; returns
    (origin requests, blocking reloads among them)."""
    root = os.path.join(tmp, "empty")
    os.makedirs(root, exist_ok=True)
    st = ll.Stream(clips, 4, window=10)
    o = ll.LLOrigin(st).start()
    try:
        # a blocking reload is held up to 3 target durations (12 s) upstream
        extra = edge_conf() + 'origin:\n  urls: ["%s"]\n  read_timeout: 20s\n' % o.url
        with Server(root, extra) as srv:
            play(player, "http://127.0.0.1:%d/live/master.m3u8" % srv.plain_port, "LL from an origin", True,
                 ll_bound, **kw)
    finally:
        o.stop()
    total = sum(o.requests.values())
    blocking = sum(n for k, n in o.requests.items() if "_HLS_msn=" in k)
    print("  the origin saw %d requests, %d of them blocking reloads" % (total, blocking))
    return total, blocking


def test_ll_and_plain_from_root():
    player, clips = setup()
    if ASAN:
        print("  sanitizer build: LL only (plain live's run tests the player, not the edge)")
    from_root(player, clips, TMP, plain=not ASAN)


def test_ll_from_origin():
    player, clips = setup()
    from_origin(player, clips, TMP)


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
