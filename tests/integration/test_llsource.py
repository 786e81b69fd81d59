"""The LL-HLS test source itself (he_llsource.py, scripts/ll-source.py), so
the edge's LL tests stand on a source that is right: real media that
ffprobe decodes across the clip's loop, playlists that follow
draft-pantos-hls-rfc8216bis, and an origin that answers blocking reloads
by its rules. It does not start hlsedge.

  - files mode (the CLI, ~5 s): master, LL and plain media playlists with
    the LL tags (4.4.3.7 SERVER-CONTROL with CAN-BLOCK-RELOAD, PART-HOLD-BACK
    = 3 x PART-TARGET, CAN-SKIP-UNTIL = 6 x TD; 4.4.3.8 PART-INF; 4.4.4.9
    PART with INDEPENDENT=YES on parts that open with an IDR frame;
    4.4.5.3 PRELOAD-HINT naming the next part; 4.4.5.4 RENDITION-REPORT
    for the other rendition); every listed file exists, the playlist
    advances with the clock, old files go;
  - the media: init + segments across the loop decode with ffprobe (H.264
    and AAC), video timestamps strictly increasing through the loop; a
    segment is its parts concatenated;
  - origin mode (6.2.5.2): a request for the next part is held until that
    part is out and then lists it; a part index past the segment's last
    part means part 0 of the next; 400 for _HLS_part without _HLS_msn,
    for _HLS_msn past the last MSN + 2 and for _HLS_part past the Advance
    Part Limit; 503 when the playlist does not get there within three
    target durations (a stalled source); a preload-hinted part (6.2.6) is
    held until it exists; _HLS_skip=YES (6.2.5.1) answers with EXT-X-SKIP
    (4.4.5.2) and the MEDIA-SEQUENCE of the full playlist.

Skips (77) without ffmpeg/ffprobe. Bounded: about 30 s in all."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from he import SRC, expect, expect_eq, run_main  # noqa: E402
import he_llsource as ll  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-llsource-")
WORK = os.path.join(TMP, "work")


def need_tools():
    for t in ("ffmpeg", "ffprobe"):
        if not shutil.which(t):
            print("SKIP: %s not installed (apt-get install ffmpeg)" % t)
            sys.exit(77)


def tags(body):
    return [l for l in body.decode().splitlines() if l.startswith("#")]


def attr(line, name):
    m = re.search(r'(?:^|[:,])%s=("[^"]*"|[^,]*)' % name, line)
    return m.group(1).strip('"') if m else None


def check_ll_playlist(body, other):
    """The LL tags of one media playlist; returns (last msn, last part)."""
    t = tags(body)
    version = int([x for x in t if x.startswith("#EXT-X-VERSION:")][0].split(":")[1])
    expect(version >= 9, "EXT-X-VERSION %d" % version)
    td = int([x for x in t if x.startswith("#EXT-X-TARGETDURATION:")][0].split(":")[1])
    sc = [x for x in t if x.startswith("#EXT-X-SERVER-CONTROL:")]
    expect(sc and attr(sc[0], "CAN-BLOCK-RELOAD") == "YES", "CAN-BLOCK-RELOAD: %s" % sc)
    pt = float(attr([x for x in t if x.startswith("#EXT-X-PART-INF:")][0], "PART-TARGET"))
    expect_eq(float(attr(sc[0], "PART-HOLD-BACK")), 3 * pt, "PART-HOLD-BACK")
    expect_eq(float(attr(sc[0], "CAN-SKIP-UNTIL")), 6.0 * td, "CAN-SKIP-UNTIL")
    expect(any(x.startswith("#EXT-X-MAP:") for x in t), "EXT-X-MAP")
    parts = [x for x in t if x.startswith("#EXT-X-PART:")]
    expect(len(parts) >= 4, "parts listed: %d" % len(parts))
    for p in parts:
        expect(float(attr(p, "DURATION")) <= pt + 1e-6, "a part longer than PART-TARGET: " + p)
    # the clip has an IDR frame every 2 parts (gop 1 s, parts 0.5 s)
    indep = [p for p in parts if attr(p, "INDEPENDENT") == "YES"]
    expect(indep and len(indep) < len(parts), "INDEPENDENT=YES on some parts only: %s" % parts)
    for p in indep:
        expect_eq(int(attr(p, "URI")[:-4].split(".")[1]) % 2, 0, "an independent part's index")
    hint = [x for x in t if x.startswith("#EXT-X-PRELOAD-HINT:")]
    expect(len(hint) == 1 and attr(hint[0], "TYPE") == "PART", "one PRELOAD-HINT of TYPE=PART: %s" % hint)
    last = attr(parts[-1], "URI")[1:-4].split(".")
    lm, lp = int(last[0]), int(last[1])
    nxt = (lm, lp + 1) if lp + 1 < 4 else (lm + 1, 0)
    expect_eq(attr(hint[0], "URI"), "p%d.%d.m4s" % nxt, "the hint names the next part")
    rr = [x for x in t if x.startswith("#EXT-X-RENDITION-REPORT:")]
    expect(len(rr) == 1 and attr(rr[0], "URI") == "../%s/index.m3u8" % other, "RENDITION-REPORT: %s" % rr)
    expect_eq((int(attr(rr[0], "LAST-MSN")), int(attr(rr[0], "LAST-PART"))), (lm, lp), "the report's last part")
    return lm, lp


def uris(body):
    out = [l for l in body.decode().splitlines() if l and not l.startswith("#")]
    out += re.findall(r'URI="([^"]+)"', body.decode())
    return out


def ffprobe_video_pts(path):
    r = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "packet=pts_time,stream_index:stream=codec_name",
                        "-of", "json", path], capture_output=True, text=True, timeout=60)
    expect_eq(r.returncode, 0, "ffprobe of %s: %s" % (path, r.stderr[-500:]))
    j = json.loads(r.stdout)
    codecs = [s["codec_name"] for s in j["streams"]]
    pts = [float(p["pts_time"]) for p in j["packets"] if p["stream_index"] == 0]
    return codecs, pts


def test_files_mode_cli():
    need_tools()
    out = os.path.join(TMP, "root", "live")
    t0 = time.time()
    proc = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "ll-source.py"), "--dir", out,
                           "--work", WORK, "--part-target", "0.5", "--gop", "1", "--window", "2", "--backlog", "6",
                           "--seconds", "5"], capture_output=True, text=True, timeout=180)
    expect_eq(proc.returncode, 0, "ll-source.py: %s" % proc.stderr)
    # the playlists as left at the end, and what they name exists
    with open(os.path.join(out, "master.m3u8"), "rb") as f:
        master = f.read()
    variants = [u for u in uris(master)]
    expect_eq(variants, ["360p/index.m3u8", "180p/index.m3u8"], "master's variants")
    expect(b'CODECS="avc1.' in master and b"mp4a.40.2" in master, "CODECS in the master")
    for name, other in (("360p", "180p"), ("180p", "360p")):
        d = os.path.join(out, name)
        with open(os.path.join(d, "index.m3u8"), "rb") as f:
            body = f.read()
        lm, lp = check_ll_playlist(body, other)
        # a backlog of 6 segments of 2 s (the last 2 written), then ~5 s of
        # publishing: ~10 parts more
        expect((lm - 6) * 4 + lp >= 6, "the playlist advanced with the clock: last part %d.%d" % (lm, lp))
        for u in uris(body):
            if u != "p%d.%d.m4s" % ((lm, lp + 1) if lp < 3 else (lm + 1, 0)):  # the hint is not there yet
                expect(os.path.exists(os.path.join(d, u)), "%s/%s listed but missing" % (name, u))
        with open(os.path.join(d, "plain.m3u8"), "rb") as f:
            plain = f.read()
        expect(b"#EXT-X-PART" not in plain and b"#EXT-X-SERVER-CONTROL" not in plain, "plain has no LL tags")
        expect_eq(plain.count(b"#EXTINF"), body.count(b"#EXTINF"), "plain lists the same segments")
        # old files go: a segment stays for twice the window (6.2.2), a
        # part 3 target durations after it leaves the playlist; s3 was
        # written at the start, and by now the window is past s7
        files = os.listdir(d)
        expect("s3.m4s" not in files and "s%d.m4s" % (lm - 1) in files, "old segments deleted: %s" % sorted(files))
        expect(len([f for f in files if f.startswith("s")]) <= 4, "at most 2 x window segments: %s" % sorted(files))
        left = [f for f in files if ".tmp" in f]
        expect(not left, "temporary files left: %s" % left)
    print("  files: %.1f s, last part %d.%d" % (time.time() - t0, lm, lp))


def test_media_decodes_across_the_loop():
    need_tools()
    clips = ll.encode_clips(WORK, 0.5, 4, gop=1.0)
    st = ll.Stream(clips, 4, window=6)
    n = st.clip_parts  # parts per loop; segments 0..3 cover two loops
    path = os.path.join(TMP, "loop.mp4")
    with open(path, "wb") as f:
        f.write(clips[0].init)
        for msn in range(4):
            f.write(st.segment_bytes("360p", msn))
    codecs, pts = ffprobe_video_pts(path)
    expect_eq(codecs, ["h264", "aac"], "codecs")
    expect(len(pts) >= 4 * 2 * 30 - 1, "video frames: %d" % len(pts))
    expect(all(b > a for a, b in zip(pts, pts[1:])), "video timestamps increase through the loop")
    expect(abs((pts[-1] - pts[0]) - (4 * 2 - 1 / 30.0)) < 0.05, "4 segments span 8 s: %.3f" % (pts[-1] - pts[0]))
    expect_eq(st.segment_bytes("360p", 2), b"".join(st.part_bytes("360p", k) for k in range(8, 12)),
              "a segment is its parts")
    expect(st.part_bytes("360p", n) != st.part_bytes("360p", 0), "a later loop is rewritten")


def get(url, timeout=20):
    t = time.time()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read(), time.time() - t
    except urllib.error.HTTPError as e:
        return e.code, e.read(), time.time() - t


def test_origin_blocking_reload():
    need_tools()
    clips = ll.encode_clips(WORK, 0.5, 4, gop=1.0)
    st = ll.Stream(clips, 4, window=20, backlog=20)
    o = ll.LLOrigin(st).start()
    try:
        u = o.url + "/360p/index.m3u8"
        s, body, _ = get(u)
        expect_eq(s, 200, "the playlist")
        lm, lp = check_ll_playlist(body, "180p")
        # 6.2.5.2: held until the next part is out, then listed
        nm, np_ = (lm, lp + 1) if lp < 3 else (lm + 1, 0)
        s, body, took = get(u + "?_HLS_msn=%d&_HLS_part=%d" % (nm, np_))
        expect_eq(s, 200, "a blocking reload")
        expect(('URI="p%d.%d.m4s"' % (nm, np_)).encode() in body, "the held-for part is listed")
        expect(took <= 0.5 + 0.5, "held %.2f s for one 0.5 s part" % took)
        # a part index past its segment's last part is part 0 of the next
        lm, lp = check_ll_playlist(body, "180p")
        s, body, took = get(u + "?_HLS_msn=%d&_HLS_part=4" % lm)
        expect(s == 200 and ('URI="p%d.0.m4s"' % (lm + 1)).encode() in body, "past the last part: %d" % s)
        # 400s
        last = st.last_segment(st.newest())
        for q, why in (("_HLS_part=1", "_HLS_part without _HLS_msn"),
                       ("_HLS_msn=%d" % (last + 3), "_HLS_msn past the last MSN + 2"),
                       ("_HLS_msn=%d&_HLS_part=3" % (last + 2), "_HLS_part past the Advance Part Limit"),
                       ("_HLS_msn=x", "a malformed _HLS_msn")):
            s, _, took = get(u + "?" + q)
            expect_eq(s, 400, why)
            expect(took < 1, "%s answered at once (%.2f s)" % (why, took))
        # msn + 2 without a part is held (for the segment after next), not refused
        s, body, took = get(u + "?_HLS_msn=%d" % (last + 1))
        expect(s == 200 and ("s%d.m4s" % (last + 1)).encode() in body, "held for the next segment: %d" % s)
        # 6.2.6: the preload hint is held until that part exists
        hint = re.search(rb'PRELOAD-HINT:TYPE=PART,URI="([^"]+)"', body).group(1).decode()
        s, data, took = get(o.url + "/360p/" + hint)
        hm, hp = (int(x) for x in hint[1:-4].split("."))
        expect_eq(s, 200, "the hinted part")
        expect_eq(data, st.part_bytes("360p", st.part_index(hm, hp)), "the hinted part's bytes")
        s, _, _ = get(o.url + "/360p/p%d.0.m4s" % (hm + 5))
        expect_eq(s, 404, "a part far ahead")
        # 6.2.5.1 / 4.4.5.2: a delta update
        s, full, _ = get(u)
        s, delta, _ = get(u + "?_HLS_skip=YES")
        expect_eq(s, 200, "a delta update")
        m = re.search(rb"#EXT-X-SKIP:SKIPPED-SEGMENTS=(\d+)", delta)
        expect(m and int(m.group(1)) > 0, "EXT-X-SKIP in the delta: %r" % delta[:400])
        seq = lambda b: re.search(rb"#EXT-X-MEDIA-SEQUENCE:(\d+)", b).group(1)  # noqa: E731
        expect_eq(seq(delta), seq(full), "the delta's MEDIA-SEQUENCE")
        kept = delta.count(b"#EXTINF")
        expect(kept * 2 <= 12 + 2, "a delta keeps about CAN-SKIP-UNTIL (12 s) of 2 s segments: %d" % kept)
        expect_eq(int(m.group(1)) + kept, full.count(b"#EXTINF"), "skipped + kept = the full playlist")
        # 503: a stalled source does not get there in three target durations
        lm, lp = check_ll_playlist(full, "180p")
        st.stall(30)
        s, _, took = get(u + "?_HLS_msn=%d&_HLS_part=%d" % ((lm, lp + 1) if lp < 3 else (lm + 1, 0)))
        expect_eq(s, 503, "a hold past three target durations")
        expect(5.5 <= took <= 8, "503 after 3 x TD (6 s): %.2f s" % took)
        print("  origin: holds %s s" % ["%.2f" % h for h in o.holds])
    finally:
        o.stop()


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
