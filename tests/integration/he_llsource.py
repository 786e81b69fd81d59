"""A live Low-Latency HLS source the tests control (python3 stdlib + ffmpeg).

Real H.264/AAC, made once by ffmpeg (lavfi testsrc + sine) as fragmented
MP4 (CMAF-style, one moof+mdat fragment per part), then published on a
real-time clock, looping the clip: fragment timestamps (tfdt) and sequence
numbers (mfhd) are rewritten per loop so the stream runs on without a
discontinuity, for as long as it is left running.

Per rendition, draft-pantos-hls-rfc8216bis:
  index.m3u8  LL-HLS media playlist (4.4.3.7 SERVER-CONTROL, 4.4.3.8
              PART-INF, 4.4.4.9 PART, 4.4.5.3 PRELOAD-HINT, 4.4.5.4
              RENDITION-REPORT, EXT-X-PROGRAM-DATE-TIME on every segment)
  plain.m3u8  the same stream as plain live HLS (segments only), to compare
  init.mp4    the EXT-X-MAP
  p<MSN>.<N>.m4s  part N of segment MSN
  s<MSN>.m4s      segment MSN: its parts concatenated
and master.m3u8 / master-plain.m3u8 at the top.

Part k (counted from 0) covers media time [k*PT, (k+1)*PT) and is published
at t0 + (k+1)*PT: what exists is a pure function of the clock, so an HTTP
origin can hold a request exactly until its part's time, never polling.

Two ways to publish:
  FileWriter(stream, dir)  writes into a directory (an edge's root), each
                           file to a temporary name then renamed, the way
                           a local packager does; old files are deleted.
  LLOrigin(stream)         an HTTP origin (ThreadingHTTPServer) that answers
                           blocking playlist reloads itself (6.2.5.2:
                           _HLS_msn/_HLS_part held until available, 400 and
                           503 rules), delta updates (_HLS_skip, 6.2.5.1)
                           and preload-hinted parts held until they exist.

Python API:
    clip = encode_clips(workdir, part_target=1.0)      # ffmpeg, once
    st = Stream(clip)                                  # clock starts now
    w = FileWriter(st, root + "/live").start() ... w.stop()
    o = LLOrigin(st).start(); o.url ... o.stop()
    st.stall(seconds)    publish nothing for a while (then resume)
Command line: scripts/ll-source.py (see main()).
"""

import argparse
import datetime
import http.server
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

RENDITIONS = [("360p", 640, 360, 700), ("180p", 320, 180, 250)]  # name, w, h, kbit/s
AUDIO_RATE = 48000
AAC_FRAME = 1024


class SourceError(Exception):
    """Something the user can fix: a missing ffmpeg, bad options."""


# ---- fragmented MP4 -------------------------------------------------------

def _boxes(b, off, end):
    while off + 8 <= end:
        size, kind = struct.unpack(">I4s", b[off:off + 8])
        if size < 8 or off + size > end:
            raise SourceError("malformed MP4 box %r at %d" % (kind, off))
        yield off, size, kind
        off += size


def _child(b, off, size, kind):
    for o, s, k in _boxes(b, off + 8, off + size):
        if k == kind:
            return o, s
    return None


class Fragment:
    """One moof+mdat: its bytes, where its tfdt/mfhd fields sit (to patch
    per loop), its duration in seconds and whether it starts with a sync
    sample (an IDR frame: INDEPENDENT=YES)."""

    def __init__(self, data, tfdt_at, mfhd_at, duration, independent):
        self.data, self.tfdt_at, self.mfhd_at = data, tfdt_at, mfhd_at
        self.duration, self.independent = duration, independent

    def bytes_for(self, loop_offsets, sequence):
        """The fragment as published in a later loop: tfdt of track id T
        plus loop_offsets[T] (in its timescale), mfhd = sequence."""
        b = bytearray(self.data)
        struct.pack_into(">I", b, self.mfhd_at, sequence & 0xffffffff)
        for track, at, version in self.tfdt_at:
            if version == 1:
                struct.pack_into(">Q", b, at, struct.unpack_from(">Q", b, at)[0] + loop_offsets[track])
            else:
                struct.pack_into(">I", b, at, (struct.unpack_from(">I", b, at)[0] + loop_offsets[track]) & 0xffffffff)
        return bytes(b)


def split_fmp4(data, video_track=1):
    """(init bytes, [Fragment], {track id: timescale}, codec string) of an
    ffmpeg fragmented MP4 (empty moov, one moof+mdat per fragment)."""
    init_end = None
    timescales, trex = {}, {}
    codec = None
    frags = []
    pending = None
    for off, size, kind in _boxes(data, 0, len(data)):
        if kind == b"moov":
            init_end = off + size
            for o, s, k in _boxes(data, off + 8, off + size):
                if k == b"trak":
                    tkhd = _child(data, o, s, b"tkhd")
                    v = data[tkhd[0] + 8]
                    tid = struct.unpack_from(">I", data, tkhd[0] + (20 if v == 0 else 28))[0]
                    mdia = _child(data, o, s, b"mdia")
                    mdhd = _child(data, mdia[0], mdia[1], b"mdhd")
                    mv = data[mdhd[0] + 8]
                    timescales[tid] = struct.unpack_from(">I", data, mdhd[0] + (20 if mv == 0 else 28))[0]
                elif k == b"mvex":
                    for o2, s2, k2 in _boxes(data, o + 8, o + s):
                        if k2 == b"trex":
                            tid, _, dur, _, flags = struct.unpack_from(">5I", data, o2 + 12)
                            trex[tid] = (dur, flags)
            at = data.find(b"avcC", off, off + size)
            if at > 0:
                codec = "avc1.%02x%02x%02x" % (data[at + 5], data[at + 6], data[at + 7])
        elif kind == b"moof":
            pending = (off, size)
        elif kind == b"mdat" and pending:
            moff, msize = pending
            pending = None
            tfdts, mfhd_at, duration, independent = [], None, None, None
            for o, s, k in _boxes(data, moff + 8, moff + msize):
                if k == b"mfhd":
                    mfhd_at = o + 12 - moff
                elif k == b"traf":
                    tid, ddur, dflags, base_dts = None, None, None, 0
                    for o2, s2, k2 in _boxes(data, o + 8, o + s):
                        if k2 == b"tfhd":
                            fl = struct.unpack_from(">I", data, o2 + 8)[0] & 0xffffff
                            tid = struct.unpack_from(">I", data, o2 + 12)[0]
                            p = o2 + 16 + (8 if fl & 1 else 0) + (4 if fl & 2 else 0)
                            if fl & 8:
                                ddur = struct.unpack_from(">I", data, p)[0]
                                p += 4
                            if fl & 0x10:
                                p += 4
                            if fl & 0x20:
                                dflags = struct.unpack_from(">I", data, p)[0]
                        elif k2 == b"tfdt":
                            v = data[o2 + 8]
                            tfdts.append((tid, o2 + 12 - moff, v))
                        elif k2 == b"trun" and tid == video_track:
                            fl = struct.unpack_from(">I", data, o2 + 8)[0] & 0xffffff
                            n = struct.unpack_from(">I", data, o2 + 12)[0]
                            p = o2 + 16 + (4 if fl & 1 else 0)
                            first_flags = None
                            if fl & 4:
                                first_flags = struct.unpack_from(">I", data, p)[0]
                                p += 4
                            per = sum(4 for bit in (0x100, 0x200, 0x400, 0x800) if fl & bit)
                            d = ddur if ddur is not None else trex.get(tid, (0, 0))[0]
                            total = 0
                            for i in range(n):
                                q = p + i * per
                                total += struct.unpack_from(">I", data, q)[0] if fl & 0x100 else d
                                if i == 0 and first_flags is None:
                                    if fl & 0x400:
                                        first_flags = struct.unpack_from(
                                            ">I", data, q + (4 if fl & 0x100 else 0) + (4 if fl & 0x200 else 0))[0]
                                    else:
                                        first_flags = dflags if dflags is not None else trex.get(tid, (0, 0))[1]
                            duration = total / float(timescales[tid])
                            independent = not (first_flags & 0x10000)  # sample_is_non_sync_sample
            if mfhd_at is None or duration is None:
                raise SourceError("a fragment without mfhd or video trun")
            frags.append(Fragment(data[moff:off + size], tfdts, mfhd_at, duration, independent))
    if init_end is None or not frags:
        raise SourceError("not a fragmented MP4 (no moov or no fragments)")
    return data[:init_end], frags, timescales, codec


class Clip:
    """One rendition's encoded clip: init, fragments (one per part)."""

    def __init__(self, name, width, height, data, part_target, fps):
        self.name, self.width, self.height, self.fps = name, width, height, fps
        self.init, self.frags, self.timescales, self.codec = split_fmp4(data)
        self.seconds = sum(f.duration for f in self.frags)
        for i, f in enumerate(self.frags):
            if abs(f.duration - part_target) > 0.002:
                raise SourceError("%s: fragment %d lasts %.3f s, not the part target %.3f s"
                                  % (name, i, f.duration, part_target))
        self.peak_bps = max(len(f.data) for f in self.frags) * 8 / part_target


def encode_clips(workdir, part_target=1.0, parts_per_segment=4, segments=2, gop=2.0, fps=30,
                 renditions=RENDITIONS, ffmpeg="ffmpeg"):
    """Encodes the clip of every rendition once with ffmpeg: segments x
    parts_per_segment parts of part_target s, an IDR frame every gop s.
    Returns Clips (cached in workdir as <name>.mp4)."""
    if not shutil.which(ffmpeg):
        raise SourceError("ffmpeg not installed (apt-get install ffmpeg)")
    frames = fps * part_target
    if abs(frames - round(frames)) > 1e-6 or abs(gop * fps - round(gop * fps)) > 1e-6:
        raise SourceError("a part (%.3f s) and the GOP (%.3f s) must be whole frames at %d fps"
                          % (part_target, gop, fps))
    seconds = part_target * parts_per_segment * segments
    if abs(seconds / gop - round(seconds / gop)) > 1e-6:
        raise SourceError("the clip (%.3f s) must be whole GOPs (%.3f s)" % (seconds, gop))
    os.makedirs(workdir, exist_ok=True)
    # AAC's encoder delay adds one frame: this many input samples make
    # exactly `seconds` of audio, so each loop's audio ends where its video does
    samples = int(round(seconds * AUDIO_RATE)) - AAC_FRAME
    clips = []
    for name, w, h, kbit in renditions:
        out = os.path.join(workdir, "%s-%g-%d-%d.mp4" % (name, part_target, parts_per_segment, segments))
        if not os.path.exists(out):
            cmd = [ffmpeg, "-nostdin", "-loglevel", "error", "-y",
                   "-f", "lavfi", "-i", "testsrc=size=%dx%d:rate=%d:duration=%g" % (w, h, fps, seconds),
                   "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=%d,atrim=end_sample=%d" % (AUDIO_RATE, samples),
                   "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-pix_fmt", "yuv420p",
                   "-b:v", "%dk" % kbit, "-maxrate", "%dk" % kbit, "-bufsize", "%dk" % kbit,
                   "-g", str(int(round(gop * fps))), "-keyint_min", str(int(round(gop * fps))),
                   "-sc_threshold", "0", "-bf", "0",
                   "-c:a", "aac", "-b:a", "64k", "-ac", "2",
                   "-avoid_negative_ts", "disabled",  # no stretched first frame for the encoder delay
                   "-f", "mp4", "-movflags", "+empty_moov+default_base_moof+frag_keyframe+skip_trailer",
                   "-frag_duration", str(int(round(part_target * 1e6))), out + ".tmp"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise SourceError("ffmpeg failed for %s: %s" % (name, r.stderr[-1000:]))
            os.rename(out + ".tmp", out)
        with open(out, "rb") as f:
            clips.append(Clip(name, w, h, f.read(), part_target, fps))
    n = len(clips[0].frags)
    if n != parts_per_segment * segments or any(len(c.frags) != n for c in clips):
        raise SourceError("ffmpeg made %s fragments, wanted %d"
                          % ([len(c.frags) for c in clips], parts_per_segment * segments))
    return clips


# ---- the clock and the playlists ------------------------------------------

class Stream:
    """The live stream: which parts exist at a time, their bytes, and the
    playlists. Part k = (msn, n) with msn = first_msn + k // parts."""

    # 4.4.3.8: PART-HOLD-BACK at least 2 part targets, 3 recommended (a
    # player aims at it: tests/bench/llhls-latency.py tries others)
    PART_HOLD_BACK_PARTS = 3

    def __init__(self, clips, parts_per_segment=4, window=10, backlog=None, first_msn=0, t0=None,
                 ll_segments=3):
        self.clips = clips
        self.by_name = {c.name: c for c in clips}
        self.pt = clips[0].frags[0].duration
        self.parts = parts_per_segment
        self.seg = self.pt * parts_per_segment
        self.td = int(round(self.seg + 0.4999))  # EXT-X-TARGETDURATION: whole seconds, rounded up
        self.window = window          # segments in a playlist
        self.ll_segments = ll_segments  # segments, counted from the end, that list their parts
        self.first_msn = first_msn
        self.clip_parts = len(clips[0].frags)
        # a backlog of segments is there at once, so a player can start
        backlog = min(window, 3) if backlog is None else backlog
        self.t0 = (time.time() if t0 is None else t0) - backlog * self.seg
        self.lock = threading.Condition()
        self.stalls = []  # (from, seconds): publishing stopped; later parts shifted
        self.part_hold_back = self.PART_HOLD_BACK_PARTS * self.pt
        self.can_skip_until = 6 * self.td      # 4.4.3.7: at least 6x the target duration

    # time <-> parts
    def _shift(self, until):
        return sum(s for f, s in self.stalls if f < until)

    def newest(self, now=None):
        """The global index of the newest published part, or -1."""
        now = time.time() if now is None else now
        for f, s in self.stalls:
            if f <= now < f + s:
                now = f
                break
        k = int((now - self.t0 - self._shift(now)) / self.pt + 1e-9) - 1
        return k

    def publish_time(self, k):
        """When part k is (or, as things stand, will be) published."""
        t = self.t0 + (k + 1) * self.pt
        for f, s in sorted(self.stalls):
            if t > f:
                t += s
        return t

    def stall(self, seconds):
        """Publish nothing for seconds from now, then carry on from there."""
        with self.lock:
            self.stalls.append((time.time(), seconds))
            self.lock.notify_all()

    def ident(self, k):
        return self.first_msn + k // self.parts, k % self.parts

    def part_index(self, msn, n):
        return (msn - self.first_msn) * self.parts + n

    def part_bytes(self, name, k):
        clip = self.by_name[name]
        loop, i = divmod(k, self.clip_parts)
        offsets = {t: int(round(loop * clip.seconds * ts)) for t, ts in clip.timescales.items()}
        return clip.frags[i].bytes_for(offsets, k + 1)

    def segment_bytes(self, name, msn):
        k0 = self.part_index(msn, 0)
        return b"".join(self.part_bytes(name, k) for k in range(k0, k0 + self.parts))

    def independent(self, name, k):
        return self.by_name[name].frags[k % self.clip_parts].independent

    def pdt(self, msn):
        t = self.publish_time(self.part_index(msn, 0)) - self.pt
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="milliseconds") \
            .replace("+00:00", "Z")

    def last_segment(self, newest):
        """The MSN of the newest complete segment (first_msn - 1: none)."""
        return self.first_msn + (newest + 1) // self.parts - 1

    def segments(self, newest):
        last = self.last_segment(newest)
        return list(range(max(self.first_msn, last - self.window + 1), last + 1))

    def master(self, plain=False):
        lines = ["#EXTM3U", "#EXT-X-VERSION:%d" % (7 if plain else 9), "#EXT-X-INDEPENDENT-SEGMENTS"]
        for c in self.clips:
            bw = int(c.peak_bps * 1.1) + 70000
            lines += ['#EXT-X-STREAM-INF:BANDWIDTH=%d,RESOLUTION=%dx%d,CODECS="%s,mp4a.40.2",FRAME-RATE=%.3f'
                      % (bw, c.width, c.height, c.codec, c.fps),
                      "%s/%s" % (c.name, "plain.m3u8" if plain else "index.m3u8")]
        return ("\n".join(lines) + "\n").encode()

    def playlist(self, name, newest, skip=False):
        """The LL-HLS media playlist as of part newest; skip: a delta update
        (4.4.5.2: EXT-X-SKIP replaces segments older than CAN-SKIP-UNTIL
        from the playlist's end)."""
        segs = self.segments(newest)
        last = self.last_segment(newest)
        partial = (newest + 1) % self.parts  # parts of segment last+1 out
        lines = ["#EXTM3U", "#EXT-X-VERSION:9", "#EXT-X-TARGETDURATION:%d" % self.td,
                 "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=%.3f,CAN-SKIP-UNTIL=%.1f"
                 % (self.part_hold_back, self.can_skip_until),
                 "#EXT-X-PART-INF:PART-TARGET=%.3f" % self.pt,
                 "#EXT-X-MEDIA-SEQUENCE:%d" % (segs[0] if segs else last + 1),
                 '#EXT-X-MAP:URI="init.mp4"']
        end = len(segs) * self.seg + partial * self.pt
        skipped = 0
        if skip:
            # a segment that ends CAN-SKIP-UNTIL or more before the end
            while skipped < len(segs) and end - (skipped + 1) * self.seg >= self.can_skip_until - 1e-9:
                skipped += 1
            if skipped:
                lines.append("#EXT-X-SKIP:SKIPPED-SEGMENTS=%d" % skipped)
        with_parts = set(range(last - self.ll_segments + 2, last + 2))
        for msn in segs[skipped:] + ([last + 1] if partial else []):
            lines.append("#EXT-X-PROGRAM-DATE-TIME:%s" % self.pdt(msn))
            if msn in with_parts:
                for n in range(self.parts if msn <= last else partial):
                    k = self.part_index(msn, n)
                    lines.append('#EXT-X-PART:DURATION=%.3f,URI="p%d.%d.m4s"%s'
                                 % (self.pt, msn, n, ",INDEPENDENT=YES" if self.independent(name, k) else ""))
            if msn <= last:
                lines += ["#EXTINF:%.3f," % self.seg, "s%d.m4s" % msn]
        nm, nn = self.ident(newest + 1)
        lines.append('#EXT-X-PRELOAD-HINT:TYPE=PART,URI="p%d.%d.m4s"' % (nm, nn))
        lm, ln = self.ident(newest)
        for c in self.clips:
            if c.name != name:
                lines.append('#EXT-X-RENDITION-REPORT:URI="../%s/index.m3u8",LAST-MSN=%d,LAST-PART=%d'
                             % (c.name, lm, ln))
        return ("\n".join(lines) + "\n").encode()

    def plain_playlist(self, name, newest):
        segs = self.segments(newest)
        lines = ["#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:%d" % self.td,
                 "#EXT-X-MEDIA-SEQUENCE:%d" % (segs[0] if segs else self.first_msn),
                 '#EXT-X-MAP:URI="init.mp4"']
        for msn in segs:
            lines += ["#EXT-X-PROGRAM-DATE-TIME:%s" % self.pdt(msn), "#EXTINF:%.3f," % self.seg, "s%d.m4s" % msn]
        return ("\n".join(lines) + "\n").encode()

    # what may still be fetched: segments for twice the window (a segment
    # stays available for its duration plus the playlist's, 6.2.2), parts
    # for three target durations after they leave the playlist
    def segment_servable(self, msn, newest):
        last = self.last_segment(newest)
        return last - 2 * self.window < msn <= last

    def part_servable(self, k, newest):
        if k > newest:
            return False
        msn, _ = self.ident(k)
        oldest_listed = self.last_segment(newest) - self.ll_segments + 2
        return msn >= oldest_listed - int(3 * self.td / self.seg + 0.999)


# ---- mode (a): files in a directory ---------------------------------------

def write_atomic(path, data):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


class FileWriter(threading.Thread):
    """Publishes the stream into directory as files, on the stream's clock."""

    def __init__(self, stream, directory, plain=True):
        super().__init__(daemon=True)
        self.st, self.dir, self.plain = stream, directory, plain
        self.stop_ev = threading.Event()
        self.written = -1  # newest part written
        self.error = None

    def _publish(self, newest):
        st = self.st
        for c in st.clips:
            d = os.path.join(self.dir, c.name)
            for k in range(max(self.written + 1, newest - st.window * st.parts), newest + 1):
                msn, n = st.ident(k)
                write_atomic(os.path.join(d, "p%d.%d.m4s" % (msn, n)), st.part_bytes(c.name, k))
                if n == st.parts - 1:
                    write_atomic(os.path.join(d, "s%d.m4s" % msn), st.segment_bytes(c.name, msn))
        for c in st.clips:
            d = os.path.join(self.dir, c.name)
            write_atomic(os.path.join(d, "index.m3u8"), st.playlist(c.name, newest))
            if self.plain:
                write_atomic(os.path.join(d, "plain.m3u8"), st.plain_playlist(c.name, newest))
            self._clean(d, newest)
        self.written = newest

    def _clean(self, d, newest):
        for f in os.listdir(d):
            try:
                if f.startswith("s") and f.endswith(".m4s"):
                    if not self.st.segment_servable(int(f[1:-4]), newest):
                        os.unlink(os.path.join(d, f))
                elif f.startswith("p") and f.endswith(".m4s"):
                    msn, n = f[1:-4].split(".")
                    if not self.st.part_servable(self.st.part_index(int(msn), int(n)), newest):
                        os.unlink(os.path.join(d, f))
            except (ValueError, FileNotFoundError):
                pass

    def start(self):
        for c in self.st.clips:
            d = os.path.join(self.dir, c.name)
            os.makedirs(d, exist_ok=True)
            write_atomic(os.path.join(d, "init.mp4"), c.init)
        self._publish(self.st.newest())
        write_atomic(os.path.join(self.dir, "master.m3u8"), self.st.master())
        if self.plain:
            write_atomic(os.path.join(self.dir, "master-plain.m3u8"), self.st.master(plain=True))
        super().start()
        return self

    def run(self):
        try:
            while not self.stop_ev.is_set():
                k = self.written + 1
                wait = self.st.publish_time(k) - time.time()
                if wait > 0 and self.stop_ev.wait(min(wait, 0.5)):
                    break
                newest = self.st.newest()
                if newest > self.written:
                    self._publish(newest)
        except Exception as e:  # reported by stop()
            self.error = e

    def stop(self):
        self.stop_ev.set()
        self.join(5)
        if self.error:
            raise self.error


# ---- mode (b): an HTTP origin answering blocking reloads ------------------

def advance_part_limit(pt):
    """6.2.5.2: three parts, or 3 / PART-TARGET when that is under 1 s."""
    return int(3 / pt) if pt < 1 else 3


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "he-llsource"

    def log_message(self, *a):
        pass

    def _send(self, code, body, ctype="text/plain", max_age=None, head=False):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Access-Control-Allow-Origin", "*")
        if max_age is not None:
            self.send_header("Cache-Control", "max-age=%d" % max_age)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_HEAD(self):
        self._serve(True)

    def do_GET(self):
        self._serve(False)

    def _serve(self, head):
        o = self.server.origin
        st = o.stream
        url = urllib.parse.urlsplit(self.path)
        # any directory prefix (an edge's /live/...) leads to the stream
        parts = url.path.strip("/").split("/")
        parts = parts[-1:] if parts[-1].startswith("master") else parts[-2:]
        o.count(url.path, url.query)
        # Appendix B.1 TTLs, in target durations
        td = st.td
        if url.path == "/_stall":
            st.stall(float(urllib.parse.parse_qs(url.query).get("seconds", ["0"])[0]))
            return self._send(200, b"ok\n", head=head)
        if parts == ["master.m3u8"] or parts == ["master-plain.m3u8"]:
            return self._send(200, st.master(plain=parts[0] != "master.m3u8"), "application/vnd.apple.mpegurl",
                              td, head)
        if len(parts) != 2 or parts[0] not in st.by_name:
            return self._send(404, b"not found\n", max_age=td, head=head)
        name, f = parts
        if f == "init.mp4":
            return self._send(200, st.by_name[name].init, "video/mp4", 6 * td, head)
        if f == "plain.m3u8":
            return self._send(200, st.plain_playlist(name, st.newest()), "application/vnd.apple.mpegurl",
                              max(1, td // 2), head)
        if f == "index.m3u8":
            return self._playlist(name, urllib.parse.parse_qs(url.query), head)
        try:
            if f.startswith("s") and f.endswith(".m4s"):
                msn = int(f[1:-4])
                if st.segment_servable(msn, st.newest()):
                    return self._send(200, st.segment_bytes(name, msn), "video/mp4", 6 * td, head)
            elif f.startswith("p") and f.endswith(".m4s"):
                msn, n = (int(x) for x in f[1:-4].split("."))
                if 0 <= n < st.parts:
                    k = st.part_index(msn, n)
                    newest = st.newest()
                    # 6.2.6: a preload-hinted part is held until it exists
                    if newest < k <= newest + advance_part_limit(st.pt):
                        newest = o.wait_for(k, 3 * td)
                    if st.part_servable(k, newest):
                        return self._send(200, st.part_bytes(name, k), "video/mp4", 6 * td, head)
        except ValueError:
            pass
        return self._send(404, b"not found\n", max_age=td, head=head)

    def _playlist(self, name, q, head):
        """6.2.5.2 blocking playlist reload; 6.2.5.1 delta updates."""
        st = self.server.origin.stream
        td = st.td
        msn = q.get("_HLS_msn", [None])[0]
        part = q.get("_HLS_part", [None])[0]
        skip = q.get("_HLS_skip", [""])[0] in ("YES", "v2")
        newest = st.newest()
        if msn is None:
            if part is not None:
                return self._send(400, b"_HLS_part without _HLS_msn\n", max_age=td, head=head)
            return self._send(200, st.playlist(name, newest, skip), "application/vnd.apple.mpegurl",
                              max(1, td // 2), head)
        try:
            m = int(msn)
            p = None if part is None else int(part)
            if m < 0 or (p is not None and p < 0):
                raise ValueError
        except ValueError:
            return self._send(400, b"bad _HLS_msn or _HLS_part\n", max_age=td, head=head)
        if m > st.last_segment(newest) + 2:
            return self._send(400, b"_HLS_msn too far ahead\n", max_age=td, head=head)
        if p is None:
            want = st.part_index(m + 1, 0) - 1  # the last part of segment m
        else:
            # a part index past its segment's last part means part 0 of the next
            want = st.part_index(m, min(p, st.parts))
            if p >= st.parts:
                want = st.part_index(m + 1, 0)
            if want > newest + advance_part_limit(st.pt):
                return self._send(400, b"_HLS_part too far ahead\n", max_age=td, head=head)
        t_hold = time.time()
        newest = self.server.origin.wait_for(want, 3 * td)
        self.server.origin.held(time.time() - t_hold)
        if newest < want:
            return self._send(503, b"the playlist did not reach that part in time\n", max_age=td, head=head)
        return self._send(200, st.playlist(name, newest, skip), "application/vnd.apple.mpegurl", 6 * td, head)


class LLOrigin:
    """An LL-HLS origin on 127.0.0.1 (port 0: any free port)."""

    def __init__(self, stream, port=0, host="127.0.0.1"):
        self.stream = stream
        self.srv = http.server.ThreadingHTTPServer((host, port), _Handler)
        self.srv.daemon_threads = True
        self.srv.handle_error = lambda request, client_address: None  # an edge hung up mid-hold
        self.srv.origin = self
        self.port = self.srv.server_address[1]
        self.url = "http://%s:%d" % (host, self.port)
        self.lock = threading.Lock()
        self.requests = {}  # "path?query" -> count
        self.holds = []

    def count(self, path, query):
        with self.lock:
            key = path + ("?" + query if query else "")
            self.requests[key] = self.requests.get(key, 0) + 1

    def held(self, seconds):
        with self.lock:
            self.holds.append(seconds)

    def wait_for(self, k, limit):
        """Waits (not polling: a timed wait to the part's publish time, woken
        early by stall()) until part k is out or limit s pass; the newest."""
        st = self.stream
        deadline = time.time() + limit
        with st.lock:
            while True:
                now = time.time()
                newest = st.newest(now)
                if newest >= k or now >= deadline:
                    return newest
                st.lock.wait(max(0.001, min(st.publish_time(k), deadline) - now + 0.001))

    def start(self):
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


# ---- command line ---------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(
        description="A live LL-HLS source: writes files into a directory (--dir) and/or serves them "
                    "as an origin answering blocking reloads (--port).")
    ap.add_argument("--dir", help="publish files into this directory (an edge's root or below)")
    ap.add_argument("--port", type=int, help="serve as an HTTP origin on 127.0.0.1:PORT (0: any)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--part-target", type=float, default=1.0, help="seconds per part (default 1)")
    ap.add_argument("--parts", type=int, default=4, help="parts per segment (default 4)")
    ap.add_argument("--gop", type=float, default=2.0, help="seconds between IDR frames (default 2)")
    ap.add_argument("--window", type=int, default=10, help="segments in a playlist (default 10)")
    ap.add_argument("--backlog", type=int, help="segments already out at the start (default: min(window, 3))")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (default: run until killed)")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "he-llsource"),
                    help="where the encoded clips are kept")
    a = ap.parse_args(argv)
    if a.dir is None and a.port is None:
        ap.error("give --dir, --port or both")
    try:
        clips = encode_clips(a.work, a.part_target, a.parts, gop=a.gop)
        st = Stream(clips, a.parts, a.window, backlog=a.backlog)
        w = FileWriter(st, a.dir).start() if a.dir else None
        o = LLOrigin(st, a.port, a.host).start() if a.port is not None else None
    except (SourceError, OSError) as e:
        sys.stderr.write("ll-source: %s\n" % e)
        return 1
    if w:
        print("writing %s/master.m3u8 (plain live: master-plain.m3u8)" % a.dir, flush=True)
    if o:
        print("serving %s/master.m3u8 (plain live: %s/master-plain.m3u8)" % (o.url, o.url), flush=True)
    try:
        end = time.time() + a.seconds if a.seconds else None
        while end is None or time.time() < end:
            time.sleep(0.5 if end is None else max(0.01, min(0.5, end - time.time())))
            if w and w.error:
                raise w.error
    except KeyboardInterrupt:
        pass
    finally:
        if w:
            w.stop()
        if o:
            o.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
