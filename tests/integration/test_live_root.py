"""Plain live from root through the real binary (issue 17, "Plain live").

A packager writes a live media playlist into root and the edge must follow
the file within one segment (draft-pantos-hls-rfc8216bis 6.2.2: the server
publishes a new playlist every target duration, and a client reloads it
every target duration, so an edge a whole segment late makes the player
stall). The fd cache trusts a file for fd_cache.valid (5 s here, the
default); a live playlist (no EXT-X-ENDLIST) must be stat'ed again after
cache.live_fraction (50 %) of its target duration: 0.5 s for the
packager's 1 s segments here (an edge trusting the file for 5 s would run
four behind), 1 s for ffmpeg's 2 s.

  - written the way ffmpeg's HLS muxer does with temp_file (a temporary
    file renamed into place), one segment every 1 s for ~6 s, polled every
    0.25 s: the edge's EXT-X-MEDIA-SEQUENCE is never more than one behind
    the file's;
  - the same, rewritten in place (ffmpeg without temp_file): also never
    more than one behind, and a body caught half written is never served
    on the next poll again;
  - once the playlist ends (EXT-X-ENDLIST) the ended playlist is served;
  - with the real ffmpeg live muxer (-hls_time 2 -hls_list_size 6
    -hls_flags delete_segments+temp_file, a lavfi test source, 14 s) the
    edge's last segment also stays within one of the file's (skipped when ffmpeg or
    libx264 is missing).

Every loop is bounded in count and time."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, run_main  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-live-root-")
ROOT = os.path.join(TMP, "lib")
os.makedirs(os.path.join(ROOT, "live"), exist_ok=True)
TD = 1.0  # target duration and the packager's period, s
EXTRA = "fd_cache:\n  valid: 5s\ncache:\n  live_fraction: 50\n"


def playlist(seq, ended=False, window=6):
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:%d" % TD, "#EXT-X-MEDIA-SEQUENCE:%d" % seq]
    for i in range(seq, seq + window):
        lines += ["#EXTINF:%.3f," % TD, "seg%05d.ts" % i]
    if ended:
        lines.append("#EXT-X-ENDLIST")
    return ("\n".join(lines) + "\n").encode()


def media_sequence(body):
    m = re.search(rb"#EXT-X-MEDIA-SEQUENCE:(\d+)", body)
    return int(m.group(1)) if m else None


def last_segment(body):
    """The media sequence number of a playlist's last segment: ffmpeg's
    first 6 segments all have sequence 0, so this is what moves."""
    seq = media_sequence(body)
    return None if seq is None else seq + body.count(b"#EXTINF:") - 1


def write_renamed(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def write_in_place(path, data):
    # ffmpeg without temp_file: truncate, then write the new playlist
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class Packager(threading.Thread):
    """Advances the playlist by one segment every TD seconds, count times;
    self.seq is the sequence in the file (set only once it is there)."""

    def __init__(self, path, write, first=100, count=6):
        super().__init__(daemon=True)
        self.path, self.write, self.count = path, write, count
        self.seq = first
        self.write(self.path, playlist(first))
        self.done = threading.Event()

    def run(self):
        t0 = time.monotonic()
        for i in range(1, self.count + 1):
            time.sleep(max(0.0, t0 + i * TD - time.monotonic()))
            self.write(self.path, playlist(self.seq + 1))
            self.seq += 1
        self.done.set()


def follow(srv, url, file_seq, seconds, period=TD / 4):
    """Polls url every period for seconds; returns [(file seq before the
    request, edge seq or None for a body without one)]."""
    out = []
    c = srv.conn()
    try:
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline and n < int(seconds / period) + 4:
            n += 1
            before = file_seq()
            r = c.request("GET", url)
            expect_eq(r.status, 200, "GET %s" % url)
            out.append((before, media_sequence(r.body)))
            time.sleep(period)
    finally:
        c.close()
    return out


def check_follow(samples, what):
    seen = [e for _, e in samples if e is not None]
    lags = [f - e for f, e in samples if e is not None]
    expect(len(samples) >= 20, "%s: polled %d times" % (what, len(samples)))
    expect(max(lags) <= 1, "%s: the edge ran %d segments behind the file: %s" % (what, max(lags), samples))
    expect(len(set(seen)) >= 6, "%s: the edge saw the playlist advance: %s" % (what, sorted(set(seen))))
    # a torn body (caught half written) is looked at again next time
    for a, b in zip(samples, samples[1:]):
        expect(not (a[1] is None and b[1] is None), "%s: a half-written body served twice: %s" % (what, samples))
    print("  %s: %d polls, lag max %d, sequences %d..%d, torn %d" %
          (what, len(samples), max(lags), min(seen), max(seen), sum(1 for _, e in samples if e is None)))


def run_packager(srv, name, write):
    path = os.path.join(ROOT, "live", name)
    p = Packager(path, write)
    # the edge has the first version cached before the packager moves
    expect_eq(media_sequence(srv.get("/live/" + name).body), 100, "first version")
    p.start()
    samples = follow(srv, "/live/" + name, lambda: p.seq, 6 * TD + 0.5)
    p.join(TD * 8)
    expect(p.done.is_set(), "the packager finished")
    return samples


def test_live_renamed():
    with Server(ROOT, EXTRA, workers=1) as srv:
        check_follow(run_packager(srv, "renamed.m3u8", write_renamed), "temp file + rename")


def test_live_in_place():
    with Server(ROOT, EXTRA, workers=1) as srv:
        check_follow(run_packager(srv, "inplace.m3u8", write_in_place), "rewritten in place")


def test_live_then_ended():
    """The ended playlist (EXT-X-ENDLIST) replaces the live one within one
    live period, and is then what the edge serves."""
    path = os.path.join(ROOT, "live", "ends.m3u8")
    write_renamed(path, playlist(7))
    with Server(ROOT, EXTRA, workers=1) as srv:
        expect_eq(media_sequence(srv.get("/live/ends.m3u8").body), 7, "live")
        write_renamed(path, playlist(8, ended=True))
        deadline = time.monotonic() + TD * 0.5 + 1.0  # 50 % of TD and slack
        body = b""
        while time.monotonic() < deadline:
            body = srv.get("/live/ends.m3u8").body
            if b"#EXT-X-ENDLIST" in body:
                break
            time.sleep(0.1)
        expect(b"#EXT-X-ENDLIST" in body and media_sequence(body) == 8, "the ended playlist: %r" % body)
        for _ in range(3):
            expect(b"#EXT-X-ENDLIST" in srv.get("/live/ends.m3u8").body, "still the ended playlist")


def test_live_ffmpeg():
    """The real ffmpeg live muxer writing into root."""
    ffmpeg = shutil.which("ffmpeg")
    if not ffmpeg:
        print("  skipped: no ffmpeg")
        return
    enc = subprocess.run([ffmpeg, "-hide_banner", "-encoders"], capture_output=True, text=True, timeout=30)
    if "libx264" not in enc.stdout:
        print("  skipped: ffmpeg without libx264")
        return
    out = os.path.join(ROOT, "ff")
    os.makedirs(out, exist_ok=True)
    pl = os.path.join(out, "live.m3u8")
    proc = subprocess.Popen(
        [ffmpeg, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i",
         "testsrc=size=320x180:rate=25", "-t", "14", "-c:v", "libx264", "-preset", "ultrafast",
         "-g", "50", "-keyint_min", "50", "-sc_threshold", "0", "-f", "hls", "-hls_time", "2",
         "-hls_list_size", "6", "-hls_flags", "delete_segments+temp_file",
         "-hls_segment_filename", os.path.join(out, "s%05d.ts"), pl],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def file_seq():
        try:
            with open(pl, "rb") as f:
                return last_segment(f.read())
        except FileNotFoundError:
            return None

    try:
        with Server(ROOT, EXTRA, workers=1) as srv:
            deadline = time.monotonic() + 10
            while file_seq() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            expect(file_seq() is not None, "ffmpeg wrote a playlist")
            samples = []
            c = srv.conn()
            try:
                t_end = time.monotonic() + 12
                for _ in range(30):
                    if time.monotonic() >= t_end or proc.poll() is not None:
                        break
                    before = file_seq()
                    r = c.request("GET", "/ff/live.m3u8")
                    expect_eq(r.status, 200, "GET /ff/live.m3u8")
                    samples.append((before, last_segment(r.body)))
                    time.sleep(0.5)
            finally:
                c.close()
            expect(all(f is not None and e is not None for f, e in samples), "whole playlists: %s" % samples)
            lags = [f - e for f, e in samples]
            expect(len(samples) >= 15, "polled %d times" % len(samples))
            expect(max(lags) <= 1, "the edge ran %d segments behind ffmpeg's playlist: %s" % (max(lags), samples))
            expect(samples[-1][1] > samples[0][1], "ffmpeg's playlist advanced: %s" % samples)
            print("  ffmpeg: %d polls, lag max %d, sequences %d..%d" %
                  (len(samples), max(lags), samples[0][1], samples[-1][1]))
    finally:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read().decode("utf-8", "replace")
        proc.stderr.close()
    expect(proc.returncode == 0, "ffmpeg exited %s: %s" % (proc.returncode, err[-2000:]))


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
