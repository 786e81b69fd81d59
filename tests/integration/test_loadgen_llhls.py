"""hlsedge-loadgen's audiences and LL-HLS viewers against the LL-HLS source
(he_llsource.py) as an origin that answers blocking reloads itself
(draft-pantos-hls-rfc8216bis 6.2.5.2). No edge: this tests the load
generator, so the numbers it reports can be trusted through the edge.

  - --llhls: viewers make blocking reloads with _HLS_msn/_HLS_part of the
    next part and _HLS_skip=YES (the source advertises CAN-SKIP-UNTIL:
    6.2.5.1), fetch parts and preload hints (6.2.6); the report's counters
    agree with what the origin saw, no reload was answered without
    holding, holds are bounded by a part target plus slack, the latency
    behind the live edge is about PART-HOLD-BACK (3 s) and bounded;
  - a stalled source: 503 after three target durations, counted, and the
    viewers carry on when it resumes;
  - --ramp 4s: 20 viewers' joins spread over 4 s (join-time stats and the
    per-second joins in the JSON report), not all in the first second;
  - --churn 2s: viewers leave and new ones join during the run, the
    audience never above -c, every leaver replaced.

Skips (77) without ffmpeg or the loadgen binary. Bounded: about 60 s."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import expect, expect_eq, run_main  # noqa: E402
import he_llsource as ll  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-lg-llhls-")
LOADGEN = os.environ.get("HE_LOADGEN") or os.path.join(os.path.dirname(__file__), "..", "..", "build",
                                                       "hlsedge-loadgen")
WORK = os.path.join(os.environ.get("HE_SRC") or os.path.join(os.path.dirname(__file__), "..", ".."),
                    "var", "cache", "ll-source")
_CLIPS = []


def clips():
    if not shutil.which("ffmpeg"):
        print("SKIP: ffmpeg not installed (apt-get install ffmpeg)")
        sys.exit(77)
    if not os.access(LOADGEN, os.X_OK):
        print("SKIP: no loadgen binary at %s (HE_LOADGEN)" % LOADGEN)
        sys.exit(77)
    if not _CLIPS:
        _CLIPS.extend(ll.encode_clips(WORK, 1.0, 4, gop=2.0))
    return _CLIPS


def loadgen(*args, timeout=90):
    p = subprocess.run([LOADGEN, "--json", "-q"] + list(args), capture_output=True, text=True, timeout=timeout)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        raise AssertionError("loadgen %s: rc %d, not JSON: %r %r" % (args, p.returncode, p.stdout[-500:],
                                                                     p.stderr[-500:]))
    return p.returncode, j


def test_llhls_viewers():
    st = ll.Stream(clips(), 4, window=10, backlog=10)  # a full window: deltas can skip
    o = ll.LLOrigin(st).start()
    try:
        rc, j = loadgen("--llhls", "--viewers", "8", "-d", "12s", "--rendition", "fixed:0",
                        o.url + "/master.m3u8")
    finally:
        o.stop()
    l = j["llhls"]
    print("  %s" % json.dumps(l))
    expect_eq(rc, 0, "loadgen's exit status (errors: %s)" % j.get("error_kinds"))
    expect_eq(j["errors"], 0, "errors")
    blocking = {k: n for k, n in o.requests.items() if "_HLS_msn=" in k}
    expect(all("_HLS_part=" in k for k in blocking), "every blocking reload names a part: %s" % list(blocking)[:5])
    skips = sum(n for k, n in blocking.items() if "_HLS_skip=YES" in k)
    expect_eq(l["reloads"], sum(blocking.values()), "reloads counted = blocking reloads the origin saw")
    expect(skips >= l["reloads"] - 8, "all but each viewer's first reload ask for a delta: %d of %d"
           % (skips, l["reloads"]))
    expect(l["deltas"] >= skips - 8 and l["deltas"] > 0, "delta updates counted: %d" % l["deltas"])
    parts = sum(n for k, n in o.requests.items() if "/p" in k.split("?")[0])
    expect_eq(l["parts"] + l["part_misses"], parts, "parts counted = part requests the origin saw")
    expect_eq(l["part_misses"], 0, "part misses")
    # ~12 s at one part a second, and a start PART-HOLD-BACK (3 parts) back
    expect(8 * 10 <= l["parts"] <= 8 * 17, "parts per viewer about 12-16: %d in all" % l["parts"])
    expect(l["hints"] > 0, "parts fetched by their preload hint: %d" % l["hints"])
    expect_eq(l["not_held"], 0, "reloads answered without holding")
    expect_eq((l["status_400"], l["status_503"]), (0, 0), "400 / 503")
    expect(l["hold"]["count"] == l["reloads"] and l["hold"]["max_ms"] < 1000 * (1 + 0.5),
           "holds within a part target and slack: %s" % l["hold"])
    expect(l["hold"]["p50_ms"] > 100, "a blocking reload is held: %s" % l["hold"])
    lat = l["latency"]
    expect(lat["count"] > 0 and 2.0 <= lat["p50_s"] <= 6.0, "latency about PART-HOLD-BACK (3 s): %s" % lat)
    expect_eq(l["part_stalls"], 0, "part stalls")


def test_llhls_503():
    """6.2.5.2: a server that cannot produce the playlist in three target
    durations answers 503; the viewers count it and go on."""
    st = ll.Stream(clips(), 4, window=10)
    o = ll.LLOrigin(st).start()
    try:
        proc = subprocess.Popen([LOADGEN, "--json", "-q", "--llhls", "--viewers", "3", "-d", "34s",
                                 o.url + "/360p/index.m3u8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(4)
        # a preload hint is held up to 3 x TD (12 s) and then the reload
        # for that part another 3 x TD before its 503: stall longer than both
        st.stall(27)
        out, err = proc.communicate(timeout=60)
    finally:
        o.stop()
    l = json.loads(out)["llhls"]
    print("  %s" % json.dumps(l))
    expect(l["status_503"] >= 3, "each viewer saw a 503: %d" % l["status_503"])
    expect(l["status_503"] <= 3 * 3, "a 503 per 12 s hold, no storm: %d" % l["status_503"])
    expect(l["hold"]["max_ms"] >= 11500, "the 503 came after a hold of 3 x TD: %s" % l["hold"])
    expect(l["reloads"] > 3 * 3, "reloads before and after the stall: %d" % l["reloads"])
    expect(l["part_stalls"] >= 3, "the play heads ran dry in the stall: %d" % l["part_stalls"])


def test_ramp_spreads_joins():
    st = ll.Stream(clips(), 4, window=10)
    o = ll.LLOrigin(st).start()
    try:
        rc, j = loadgen("--viewers", "20", "--ramp", "4s", "-d", "6s", o.url + "/master-plain.m3u8")
    finally:
        o.stop()
    a = j["audience"]
    print("  %s" % json.dumps(a))
    expect_eq(rc, 0, "loadgen's exit status")
    expect_eq(a["joins"], 20, "joins")
    expect_eq(a["leaves"], 0, "leaves")
    expect(a["first_join_s"] < 0.1 and 3.5 <= a["last_join_s"] < 4.0, "joins from 0 to ~3.8 s: %s" % a)
    # evenly: 5 a second over the first 4 seconds
    expect_eq(a["joins_per_s"][:5], [5, 5, 5, 5, 0], "joins per second")
    expect(a["requests_per_s"][0] < sum(a["requests_per_s"][:5]) / 2, "requests not all in the first second: %s"
           % a["requests_per_s"])


def test_churn():
    st = ll.Stream(clips(), 4, window=10)
    o = ll.LLOrigin(st).start()
    try:
        rc, j = loadgen("--llhls", "--viewers", "10", "--churn", "2s", "-d", "10s", o.url + "/master.m3u8")
    finally:
        o.stop()
    a = j["audience"]
    print("  %s; %d requests, connects %d" % (json.dumps(a), j["requests"], j["connects"]))
    expect_eq(rc, 0, "loadgen's exit status (errors %s)" % j.get("error_kinds"))
    # mean sessions of 2 s over 10 s: ~50 sessions end; a loose bound
    expect(15 <= a["leaves"] <= 120, "viewers left: %d" % a["leaves"])
    expect(a["joins"] - a["leaves"] <= 10, "the audience stays at most -c: %d joins, %d leaves" % (a["joins"],
                                                                                                a["leaves"]))
    expect(a["joins"] >= a["leaves"] + 10 - 3, "every leaver replaced (a few may be away at the end): %s" % a)
    expect(sum(a["joins_per_s"][1:]) >= 10, "joins during the run, not only at the start: %s" % a["joins_per_s"])
    expect(j["connects"] >= a["joins"], "a new viewer comes with a new connection: %d connects" % j["connects"])


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
