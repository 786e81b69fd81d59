#!/usr/bin/env python3
"""How far behind live hls.js plays LL-HLS through the edge, against plain
live of the same stream: the figures of docs/performance.md, "Low-latency
live through the edge". hls.js (lowLatencyMode) in headless Chromium plays
the LL-HLS test source (tests/integration/he_llsource.py: 1 s parts, 4 s
segments) for PLAY_SECONDS (60) of media, three ways:

  - LL from root (the source writes its files into the edge's root);
  - plain live from root (segments only, no LL tags, the same stream);
  - LL through the edge in front of an origin that holds blocking reloads.

Each run is checked as tests/integration/test_llhls_player.py checks it
(it plays these same helpers, longer), with the generous bounds that test
used to have: LL under 10 s, plain live under 30 s, at most 3 stalls. The
figure per run is hls.js's latency (hls.latency, every 250 ms), median of
the second half of the run, less whatever the player lost by decoding
slower than real time; then what LL saves over plain live. RUNS repeats
the three (fresh edges).

    HE_BIN=$PWD/build/hlsedge python3 tests/bench/llhls-latency.py   # about 4 minutes
    PLAY_SECONDS=30 RUNS=2 python3 tests/bench/llhls-latency.py
    PART_HOLD_BACK=2.5 python3 tests/bench/llhls-latency.py   # the source's PART-HOLD-BACK, in parts

Needs chromium, npm (hls.js) and ffmpeg (scripts/setup.sh installs them).
"""

import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
os.environ.setdefault("HE_SRC", os.path.abspath(os.path.join(HERE, "..", "..")))

import test_llhls_player as t  # noqa: E402

SECONDS = float(os.environ.get("PLAY_SECONDS", "60"))
# PART-HOLD-BACK in part targets, which hls.js aims at (4.4.3.8: at least
# 2, 3 recommended)
t.ll.Stream.PART_HOLD_BACK_PARTS = float(os.environ.get("PART_HOLD_BACK", "3"))
RUNS = int(os.environ.get("RUNS", "1"))
LL_BOUND = 10.0
STALLS = 3


def main():
    player, clips = t.setup()  # exits 77 when something is missing
    rows = []
    for run in range(1, RUNS + 1):
        print("run %d of %d: %.0f s of media each" % (run, RUNS, SECONDS), flush=True)
        tmp = tempfile.mkdtemp(prefix="he-llhls-latency-")
        try:
            t.RESULTS.clear()
            saved = t.from_root(player, clips, tmp, ll_bound=LL_BOUND, seconds=SECONDS, max_stalls=STALLS)
            total, blocking = t.from_origin(player, clips, tmp, ll_bound=LL_BOUND, seconds=SECONDS,
                                            max_stalls=STALLS)
            rows.append((dict(t.RESULTS), saved, total, blocking))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\nlatency behind live, s: median of each run's second half (range), hls.js target")
    for what in ("LL from root", "plain live from root", "LL from an origin"):
        cells = []
        for res, _, _, _ in rows:
            lat, lo, hi, target = res[what]
            cells.append("%.2f (%.2f-%.2f) target %s" % (lat, lo, hi, "%.2f" % target if target is not None
                                                          else "-"))
        print("  %-22s %s" % (what, " | ".join(cells)))
    print("  LL saves over plain live: %s s" % ", ".join("%.2f" % r[1] for r in rows))
    print("  the origin: %s blocking reloads of %s requests" % (", ".join(str(r[3]) for r in rows),
                                                               ", ".join(str(r[2]) for r in rows)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        shutil.rmtree(t.TMP, ignore_errors=True)  # the test module's scratch directory
