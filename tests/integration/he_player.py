"""A real HLS player for integration tests: hls.js in headless Chromium.

    from he_player import Player, PlayerUnavailable
    try:
        p = Player()                      # finds chromium, installs hls.js once
    except PlayerUnavailable as e:
        print("SKIP:", e); sys.exit(77)
    r = p.play("http://127.0.0.1:8080/master.m3u8", seconds=10, timeout=40,
               chromium_flags=["--ignore-certificate-errors"], hls_config={"lowLatencyMode": True})
    r["media_time"], r["requests"], r["resources"], r["errors"]

A small page, served by this module's own HTTP server on 127.0.0.1, loads
hls.js, plays the URL (muted, autoplay) and reports back to the same server
by POST: progress every 250 ms, every load hls.js made (kind, URL, HTTP
status, from its *_LOADED events and error events) and, at the end, the
PerformanceResourceTiming of every request (URL, nextHopProtocol,
responseStatus). With cdp=True the harness also drives Chromium through
the DevTools protocol over a pipe (--remote-debugging-pipe: fds 3 and 4,
NUL-separated JSON, no websocket needed) and records every
Network.responseReceived (URL, protocol, status): the protocol as the
network stack saw it, whatever the server's Timing-Allow-Origin. The page ends when media time reaches `seconds`, on a
fatal hls.js error, or after `timeout` seconds; Chromium is then killed.
Nothing here knows hlsedge: any URL the browser may fetch (CORS) works.

hls.js comes from npm (the hls.js package, HE_HLSJS_VERSION, default 1),
installed once into HE_HLSJS_DIR (default var/cache/hlsjs in the source
tree, which git ignores); Chromium from Debian's chromium package
(scripts/setup.sh installs both). PlayerUnavailable says which is missing.
"""

import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from he_cdp import CdpPipe

SRC = os.environ.get("HE_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HLSJS_DIR = os.environ.get("HE_HLSJS_DIR") or os.path.join(SRC, "var", "cache", "hlsjs")
HLSJS_VERSION = os.environ.get("HE_HLSJS_VERSION", "1")
RENDITIONS = [("240p", 426, 240, 300), ("360p", 640, 360, 600)]
CONTENT_SECONDS = 16

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>he_player</title></head>
<body><video id="v" muted playsinline></video>
<script src="hls.min.js"></script>
<script>
"use strict";
const cfg = %(cfg)s;
const v = document.getElementById("v");
const t0 = performance.now();
const out = {loads: [], errors: [], progress: [], hls_version: window.Hls ? Hls.version : null};
let ended = false;
let hls = null;
out.waiting = 0;  // the media element ran dry: "waiting" events once playing
v.addEventListener("waiting", () => { if (v.currentTime > 0) out.waiting++; });
performance.setResourceTimingBufferSize(100000);
function post(o) {  // text/plain, no-cors: a simple request to the harness from any origin
  // keepalive bodies are limited to 64 KB in flight: a long run's final report is larger
  const body = JSON.stringify(o);
  return fetch(cfg.report, {method: "POST", mode: "no-cors", body: body, keepalive: body.length < 32768}).catch(() => {});
}
function status(nd) { return nd && typeof nd.status === "number" ? nd.status : null; }
function finish(why) {
  if (ended) return;
  ended = true;
  out.why = why;
  out.media_time = v.currentTime;
  out.latency = hls && Number.isFinite(hls.latency) ? hls.latency : null;
  out.target_latency = hls && Number.isFinite(hls.targetLatency) ? hls.targetLatency : null;
  out.resources = performance.getEntriesByType("resource").map(e => ({
    url: e.name, protocol: e.nextHopProtocol, status: e.responseStatus === undefined ? null : e.responseStatus,
    initiator: e.initiatorType, bytes: e.transferSize, duration: e.duration}));
  post({final: out});
}
function tick() {
  if (ended) return;
  const b = v.buffered.length ? v.buffered.end(v.buffered.length - 1) : 0;
  const p = {wall: (performance.now() - t0) / 1000, media_time: v.currentTime, buffered: b,
             ready: v.readyState, paused: v.paused, waiting: out.waiting,
             latency: hls && Number.isFinite(hls.latency) ? hls.latency : null,
             target_latency: hls && Number.isFinite(hls.targetLatency) ? hls.targetLatency : null};
  out.progress.push(p);
  post({progress: p});
  if (out.start_time === undefined && v.currentTime > 0 && !v.paused) out.start_time = v.currentTime;
  // live: seconds of media played from where playback began
  const from = cfg.live ? out.start_time : 0;
  if (from !== undefined && v.currentTime - from >= cfg.seconds) finish("played");
  else if (p.wall >= cfg.timeout) finish("timeout");
}
if (!window.Hls) finish("hls.js did not load");
else if (!Hls.isSupported()) finish("hls.js: no MediaSource in this browser");
else {
  hls = new Hls(cfg.hls_config);
  const loaded = kind => (ev, d) => {
    // an LL-HLS part (FRAG_LOADED with d.part) is logged by the part's URL
    const url = (d.part && d.part.url) || (d.frag && d.frag.url) || (d.details && d.details.url) || d.url || (d.keyInfo && d.keyInfo.decryptdata && d.keyInfo.decryptdata.uri) || null;
    out.loads.push({kind: kind, url: url, status: status(d.networkDetails), part: !!d.part});
  };
  hls.on(Hls.Events.MANIFEST_LOADED, loaded("manifest"));
  hls.on(Hls.Events.LEVEL_LOADED, loaded("level"));
  hls.on(Hls.Events.AUDIO_TRACK_LOADED, loaded("audio_track"));
  hls.on(Hls.Events.SUBTITLE_TRACK_LOADED, loaded("subtitle_track"));
  hls.on(Hls.Events.FRAG_LOADED, loaded("fragment"));
  hls.on(Hls.Events.KEY_LOADED, loaded("key"));
  hls.on(Hls.Events.ERROR, (ev, d) => {
    const e = {type: d.type, details: d.details, fatal: d.fatal,
               url: d.url || (d.frag && d.frag.url) || (d.context && d.context.url) || null,
               status: (d.response && d.response.code) || status(d.networkDetails),
               reason: d.reason || (d.error && String(d.error)) || null};
    out.errors.push(e);
    post({error: e});
    if (d.fatal) finish("fatal hls.js error: " + d.details);
  });
  hls.on(Hls.Events.MANIFEST_PARSED, () => {
    v.play().catch(e => out.errors.push({type: "play", details: String(e), fatal: false}));
  });
  v.addEventListener("error", () => {
    out.errors.push({type: "media", details: v.error ? v.error.message || String(v.error.code) : "?", fatal: true});
    finish("media element error");
  });
  hls.loadSource(cfg.src);
  hls.attachMedia(v);
  setInterval(tick, 250);
}
</script></body></html>
"""


class PlayerUnavailable(Exception):
    """Chromium or hls.js cannot be had here: the caller skips (exit 77)."""


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def ensure_hlsjs(directory=HLSJS_DIR, version=HLSJS_VERSION, timeout=120):
    """The path of hls.min.js, installed from npm into directory once."""
    js = os.path.join(directory, "node_modules", "hls.js", "dist", "hls.min.js")
    if os.path.exists(js):
        return js
    npm = shutil.which("npm")
    if not npm:
        raise PlayerUnavailable("npm not installed (apt-get install npm), needed for hls.js")
    os.makedirs(directory, exist_ok=True)
    try:
        r = subprocess.run([npm, "install", "--prefix", directory, "--no-audit", "--no-fund", "--no-save",
                            "--loglevel=error", "hls.js@%s" % version], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PlayerUnavailable("npm install hls.js@%s took over %ds" % (version, timeout))
    if r.returncode != 0 or not os.path.exists(js):
        raise PlayerUnavailable("npm install hls.js@%s into %s failed: %s" % (version, directory,
                                                                            (r.stderr or r.stdout)[-500:]))
    return js


class _Reports:
    def __init__(self):
        self.lock = threading.Lock()
        self.progress = []
        self.errors = []
        self.final = None
        self.done = threading.Event()


def _handler(page, js, reports):
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code, body, ctype):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path in ("/", "/he_player.html"):
                self._send(200, page, "text/html; charset=utf-8")
            elif path == "/hls.min.js":
                self._send(200, js, "application/javascript")
            else:
                self._send(404, b"not found", "text/plain")

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            try:
                msg = json.loads(self.rfile.read(n) or b"{}")
            except ValueError:
                msg = {}
            with reports.lock:
                if "progress" in msg:
                    reports.progress.append(msg["progress"])
                if "error" in msg:
                    reports.errors.append(msg["error"])
                if "final" in msg and reports.final is None:
                    reports.final = msg["final"]
                    reports.done.set()
            self._send(204, b"", "text/plain")

    return H


class Player:
    def __init__(self, chromium=None, hlsjs=None):
        self.chromium = chromium or find_chromium()
        if not self.chromium:
            raise PlayerUnavailable("chromium not installed (apt-get install chromium)")
        self.hlsjs = hlsjs or ensure_hlsjs()

    def play(self, url, seconds=10, timeout=40, chromium_flags=(), hls_config=None, log_dir=None, live=False,
             cdp=False):
        """Plays url until media time reaches seconds (live: until seconds
        of media have played from where playback began, start_time in the
        result) or timeout, wall seconds, passes. The page comes from this module's server, so
        the media is cross-origin to it: the server must allow CORS, and
        resource timing hides protocol (nextHopProtocol: "") unless the
        server also sends Timing-Allow-Origin (hlsedge's cors.timing_allow_origin);
        status (responseStatus) shows for CORS requests. Returns a dict: media_time (seconds played), why
        (played, timeout, fatal ...), loads (hls.js: kind, url, status),
        errors (hls.js and media errors, with status), progress (samples),
        resources (PerformanceResourceTiming: url, protocol = nextHopProtocol,
        status = responseStatus), loads' part (an LL-HLS part: url is the
        part's), latency / target_latency (hls.js's
        hls.latency and hls.targetLatency at the end, seconds behind the
        live edge; null for VOD; also in each progress sample), waiting
        (times the video element ran dry after playback began), hls_version, chromium_log (its stderr
        tail), complete (whether the page sent its final report); with
        cdp, network (Network.responseReceived: url, protocol, status) and
        cdp_error (why the DevTools session failed, or None)."""
        reports = _Reports()
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(b"", b"", reports))
        base = "http://127.0.0.1:%d/" % srv.server_address[1]
        cfg = {"src": url, "seconds": seconds, "timeout": timeout, "report": base + "report", "live": live,
               "hls_config": dict({"enableWorker": True, "debug": False}, **(hls_config or {}))}
        page = (PAGE % {"cfg": json.dumps(cfg)}).encode()
        with open(self.hlsjs, "rb") as f:
            js = f.read()
        srv.RequestHandlerClass = _handler(page, js, reports)
        th = threading.Thread(target=srv.serve_forever, daemon=True)
        srv.daemon_threads = True
        th.start()
        tmp = tempfile.mkdtemp(prefix="he-player-", dir=log_dir)
        log_path = os.path.join(tmp, "chromium.log")
        args = [self.chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--mute-audio",
                "--autoplay-policy=no-user-gesture-required", "--user-data-dir=" + os.path.join(tmp, "profile")]
        args += list(chromium_flags)
        pipe = None
        if cdp:  # a blank page first: Network is enabled before the player's page loads
            pipe = CdpPipe()
            args += ["--remote-debugging-pipe", "about:blank"]
        else:
            args.append(base)
        log = open(log_path, "wb")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, **(pipe.popen_args() if pipe else {}))
        cdp_error = None
        try:
            if pipe:
                try:
                    pipe.started()
                    pipe.open_page(base, timeout=15)
                except Exception as e:  # recorded: the caller decides what a missing session means
                    cdp_error = "%s: %s" % (type(e).__name__, e)
                    pipe.close()
                    pipe = None
            # the page gives up at timeout itself (counted from when it loaded:
            # Chromium may take a while to start on a busy machine); a little
            # more for its last report
            deadline = time.time() + timeout + 30
            while time.time() < deadline and not reports.done.is_set():
                if proc.poll() is not None:
                    break
                reports.done.wait(0.2)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            if pipe:
                pipe.close()
            log.close()
            srv.shutdown()
            srv.server_close()
        with open(log_path, "rb") as f:
            chromium_log = f.read()[-4000:].decode("utf-8", "replace")
        shutil.rmtree(tmp, ignore_errors=True)
        with reports.lock:
            final = reports.final
            r = dict(final) if final else {"loads": [], "resources": [], "hls_version": None,
                                           "media_time": max([p["media_time"] for p in reports.progress] or [0]),
                                           "why": "no final report (chromium exited %s)" % proc.returncode}
            r.setdefault("errors", [])
            for e in reports.errors:  # posted as they happened: also those after a lost final
                if e not in r["errors"]:
                    r["errors"].append(e)
            r["progress"] = list(reports.progress)
        r["complete"] = final is not None
        r["chromium_log"] = chromium_log
        if cdp:
            r["network"] = pipe.responses() if pipe else []
            r["cdp_error"] = cdp_error
        return r


def statuses(result, prefix=""):
    """Every HTTP status the page saw for URLs starting with prefix (the
    media's origin, say: the harness's own page and reports are not
    media), from hls.js and from resource timing; 0 and None (unknown) are
    left out."""
    def ours(u):
        return (u or "").startswith(prefix)
    out = [l["status"] for l in result.get("loads", []) if l.get("status") and ours(l.get("url"))]
    out += [e["status"] for e in result.get("errors", []) if e.get("status") and ours(e.get("url"))]
    out += [x["status"] for x in result.get("resources", []) if x.get("status") and ours(x.get("url"))]
    return out


def make_vod_library(root, renditions=RENDITIONS, seconds=CONTENT_SECONDS):
    """A small real library by ffmpeg: a master and one VOD media playlist
    per rendition (name, width, height, video kbit/s), H.264 + AAC in
    MPEG-TS, 2 s segments."""
    master = ["#EXTM3U", "#EXT-X-VERSION:3"]
    for name, w, h, kbit in renditions:
        d = os.path.join(root, name)
        os.makedirs(d)
        cmd = ["ffmpeg", "-nostdin", "-loglevel", "error", "-y",
               "-f", "lavfi", "-i", "testsrc2=size=%dx%d:rate=25:duration=%d" % (w, h, seconds),
               "-f", "lavfi", "-i", "sine=frequency=440:duration=%d" % seconds,
               "-c:v", "libx264", "-preset", "ultrafast", "-profile:v", "main", "-pix_fmt", "yuv420p",
               "-b:v", "%dk" % kbit, "-g", "50", "-keyint_min", "50", "-sc_threshold", "0",
               "-c:a", "aac", "-b:a", "64k", "-ac", "2",
               "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod",
               "-hls_segment_filename", os.path.join(d, "seg_%05d.ts"), os.path.join(d, "index.m3u8")]
        subprocess.run(cmd, check=True, timeout=60)
        master += ['#EXT-X-STREAM-INF:BANDWIDTH=%d,RESOLUTION=%dx%d,CODECS="avc1.4d401e,mp4a.40.2"'
                   % ((kbit + 64) * 1000 * 11 // 10, w, h), "%s/index.m3u8" % name]
    with open(os.path.join(root, "master.m3u8"), "w") as f:
        f.write("\n".join(master) + "\n")


def player_or_skip():
    """A Player, or exit 77 (the test runner's skip) when Chromium, hls.js
    or ffmpeg (the tests make their media with it) is missing."""
    try:
        player = Player()
    except PlayerUnavailable as e:
        print("SKIP: %s" % e)
        sys.exit(77)
    if not shutil.which("ffmpeg"):
        print("SKIP: ffmpeg not installed (apt-get install ffmpeg)")
        sys.exit(77)
    return player
