"""A scriptable test origin for hlsedge's cache tests (python3 stdlib only).

HTTP/1.1 with keep-alive on loopback (ThreadingHTTPServer). It serves
objects given in memory (and, optionally, files under a root directory),
counts the requests it gets per path, and can be told per path (or for
every path, "*") to:

  delay=S        wait S seconds before the response head
  rate=B         send the body at about B bytes/s
  fail=1         answer 500 (status=N: another status)
  reset=1        reset the connection (RST) instead of answering
  cut=N          send the head with the full Content-Length, N body bytes, close
  cache_control= / expires= / etag= / last_modified=   override those headers
                 ("" drops the header)

It answers 304 to If-None-Match / If-Modified-Since that match, and HEAD.
It can go down (stop listening; connections refused) and come back on the
same port, for a while or until told. It serves a live stream whose media
playlist gains a segment every `period` seconds (2 by default): media
sequence advancing, target duration 2, a sliding window of segments.

Python API:
    o = Origin(files={"/a.ts": b"..."}).start()
    o.url, o.port, o.count("/a.ts"), o.stats(), o.reset_stats()
    o.behave("/a.ts", delay=1.0) / o.behave("*", fail=1) / o.clear()
    o.put("/b.ts", data), o.down(), o.up(), o.stop()
    o.live("/live/720p", period=2.0, window=5)   # playlist at /live/720p/index.m3u8
HTTP API (not counted):
    GET /_stats                      {"total": N, "requests": {"/a.ts": N, ...}}
    GET /_control?path=/a.ts&delay=1 same keys as behave(); path defaults to "*"
    GET /_control?clear=1            forget every behaviour
    GET /_control?reset_stats=1
    GET /_control?down=S             stop listening for S seconds, then come back
Run as a program: python3 origin.py [--port N] [--root DIR] [--live /live/720p].
"""

import email.utils
import http.server
import json
import os
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse
import zlib

BEHAVIOUR_KEYS = {"delay": float, "rate": float, "fail": int, "status": int, "reset": int, "cut": int,
                  "cache_control": str, "expires": str, "etag": str, "last_modified": str}


def segment_bytes(name, size=50000):
    """Deterministic content for a generated segment."""
    seed = (name.encode() + b"|") * 8
    out = bytearray()
    i = 0
    while len(out) < size:
        out += zlib.crc32(seed + str(i).encode()).to_bytes(4, "little") * 16
        i += 1
    return bytes(out[:size])


class _Live:
    def __init__(self, prefix, period, window, target, seg_size, cache_control, t0):
        self.prefix = prefix.rstrip("/")
        self.period = period
        self.window = window
        self.target = target
        self.seg_size = seg_size
        self.cache_control = cache_control
        self.t0 = t0

    def seq(self, now=None):
        """Media sequence number now: advances every period."""
        return int(((now or time.time()) - self.t0) / self.period)

    def playlist(self, now=None):
        s = self.seq(now)
        lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:%d" % self.target,
                 "#EXT-X-MEDIA-SEQUENCE:%d" % s]
        for n in range(s, s + self.window):
            lines.append("#EXTINF:%.3f," % float(self.target))
            lines.append("seg_%d.ts" % n)
        changed = self.t0 + s * self.period
        return ("\n".join(lines) + "\n").encode(), changed

    def segment(self, path):
        name = path[len(self.prefix) + 1:]
        if not (name.startswith("seg_") and name.endswith(".ts")):
            return None
        try:
            n = int(name[4:-3])
        except ValueError:
            return None
        if n < 0 or n >= self.seq() + self.window:
            return None
        return segment_bytes(path, self.seg_size)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "he-test-origin"

    def log_message(self, fmt, *args):  # quiet
        pass

    def setup(self):
        super().setup()
        with self.server.origin._lock:
            self.server.origin._conns.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.origin._lock:
                self.server.origin._conns.discard(self.connection)

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head):
        o = self.server.origin
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        if path == "/_stats":
            return self._send_json(o.stats())
        if path == "/_control":
            return self._send_json(o._control(urllib.parse.parse_qs(url.query)))
        o._count(path)
        with o._lock:
            o.targets.append(self.path)  # as sent: test_auth checks no token reaches us
        b = o._behaviour(path)
        if b.get("delay"):
            time.sleep(b["delay"])
        if b.get("reset"):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if b.get("fail") or b.get("status", 200) >= 400:
            status = b.get("status") if b.get("status", 200) >= 400 else 500
            body = b"origin failure\n"
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
            return
        data, ctype, cc, mtime = o._content(path)
        if data is None:
            body = b"not found\n"
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
            return
        etag = b.get("etag", '"%08x-%x"' % (zlib.crc32(data), len(data)))
        lm = b.get("last_modified", email.utils.formatdate(mtime, usegmt=True))
        cc = b.get("cache_control", cc)
        expires = b.get("expires", "")
        inm = self.headers.get("If-None-Match")
        ims = self.headers.get("If-Modified-Since")
        not_modified = False
        if inm is not None:
            not_modified = bool(etag) and etag in [t.strip() for t in inm.split(",")]
        elif ims and lm:
            try:
                not_modified = email.utils.parsedate_to_datetime(lm) <= email.utils.parsedate_to_datetime(ims)
            except (TypeError, ValueError):
                pass
        self.send_response(304 if not_modified else 200)
        if etag:
            self.send_header("ETag", etag)
        if lm:
            self.send_header("Last-Modified", lm)
        if cc:
            self.send_header("Cache-Control", cc)
        if expires:
            self.send_header("Expires", expires)
        if not_modified:
            self.end_headers()
            return
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if head:
            return
        if b.get("cut") is not None:
            self.wfile.write(data[:b["cut"]])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        rate = b.get("rate")
        if not rate:
            self.wfile.write(data)
            return
        step = max(1, int(rate / 20))
        for off in range(0, len(data), step):
            self.wfile.write(data[off:off + step])
            self.wfile.flush()
            time.sleep(step / rate)

    def _send_json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False


CTYPES = {".m3u8": "application/vnd.apple.mpegurl", ".ts": "video/mp2t", ".m4s": "video/iso.segment",
          ".mp4": "video/mp4", ".aac": "audio/aac", ".vtt": "text/vtt", ".key": "application/octet-stream"}


class Origin:
    def __init__(self, files=None, root=None, port=0, host="127.0.0.1", cache_control="max-age=3600",
                 playlist_cache_control="max-age=1"):
        self.host = host
        self.port = port
        self.root = root
        self.files = dict(files or {})
        self.mtimes = {p: time.time() for p in self.files}
        self.cache_control = cache_control
        self.playlist_cache_control = playlist_cache_control
        self.lives = []
        self._lock = threading.Lock()
        self._counts = {}
        self._behave = {}
        self._srv = None
        self._thread = None
        self._up_timer = None
        self._conns = set()
        self.targets = []  # every request-target as received, query included

    # ---- lifecycle
    @property
    def url(self):
        return "http://%s:%d" % (self.host, self.port)

    def start(self):
        self._srv = _Server((self.host, self.port), _Handler)
        self._srv.origin = self
        self.port = self._srv.server_address[1]
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def down(self, seconds=None):
        """Stops listening (new connections are refused); with seconds,
        comes back by itself after that long."""
        with self._lock:
            srv, self._srv = self._srv, None
        if srv:
            srv.shutdown()
            srv.server_close()
            # a dead origin keeps no connection either
            with self._lock:
                conns, self._conns = list(self._conns), set()
            for c in conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if seconds:
            self._up_timer = threading.Timer(seconds, self.up)
            self._up_timer.daemon = True
            self._up_timer.start()

    def up(self):
        if self._srv is None:
            deadline = time.time() + 5
            while True:
                try:
                    return self.start()
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.05)
        return self

    def is_up(self):
        return self._srv is not None

    def stop(self):
        if self._up_timer:
            self._up_timer.cancel()
        self.down()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- content
    def put(self, path, data, mtime=None):
        with self._lock:
            self.files[path] = data
            self.mtimes[path] = mtime or time.time()

    def live(self, prefix, period=2.0, window=5, target=2, seg_size=50000, cache_control=None):
        """A live rendition under prefix: prefix/index.m3u8 gains a segment
        every period seconds; prefix/seg_N.ts exist up to the newest."""
        lv = _Live(prefix, period, window, target, seg_size,
                   cache_control if cache_control is not None else self.playlist_cache_control, time.time())
        with self._lock:
            self.lives.append(lv)
        return lv

    def _content(self, path):
        """(bytes, content type, Cache-Control, mtime) or (None, ...)."""
        ext = os.path.splitext(path)[1]
        ctype = CTYPES.get(ext, "application/octet-stream")
        cc = self.playlist_cache_control if ext == ".m3u8" else self.cache_control
        with self._lock:
            lives = list(self.lives)
            if path in self.files:
                return self.files[path], ctype, cc, self.mtimes[path]
        for lv in lives:
            if path == lv.prefix + "/index.m3u8":
                data, changed = lv.playlist()
                return data, ctype, lv.cache_control, changed
            if path.startswith(lv.prefix + "/"):
                data = lv.segment(path)
                if data is not None:
                    return data, ctype, self.cache_control, lv.t0
        if self.root:
            full = os.path.realpath(os.path.join(self.root, path.lstrip("/")))
            if full.startswith(os.path.realpath(self.root) + os.sep) and os.path.isfile(full):
                with open(full, "rb") as f:
                    return f.read(), ctype, cc, os.path.getmtime(full)
        return None, ctype, cc, 0

    # ---- behaviour
    def behave(self, path="*", **kw):
        for k in kw:
            if k not in BEHAVIOUR_KEYS:
                raise ValueError("unknown behaviour %r" % k)
        with self._lock:
            self._behave.setdefault(path, {}).update(kw)

    def clear(self, path=None):
        with self._lock:
            if path is None:
                self._behave.clear()
            else:
                self._behave.pop(path, None)

    def _behaviour(self, path):
        with self._lock:
            b = dict(self._behave.get("*", {}))
            b.update(self._behave.get(path, {}))
        return b

    def _control(self, q):
        one = {k: v[-1] for k, v in q.items()}
        if one.pop("clear", None):
            self.clear()
        if one.pop("reset_stats", None):
            self.reset_stats()
        if "down" in one:
            secs = float(one.pop("down"))
            # answer first, then go down
            threading.Timer(0.05, self.down, kwargs={"seconds": secs or None}).start()
        path = one.pop("path", "*")
        kw = {}
        for k, v in one.items():
            if k not in BEHAVIOUR_KEYS:
                return {"error": "unknown key %s" % k}
            kw[k] = BEHAVIOUR_KEYS[k](v)
        if kw:
            self.behave(path, **kw)
        return {"ok": True, "behaviour": self._behave}

    # ---- statistics
    def _count(self, path):
        with self._lock:
            self._counts[path] = self._counts.get(path, 0) + 1

    def count(self, path):
        with self._lock:
            return self._counts.get(path, 0)

    def total(self):
        with self._lock:
            return sum(self._counts.values())

    def stats(self):
        with self._lock:
            return {"total": sum(self._counts.values()), "requests": dict(self._counts)}

    def reset_stats(self):
        with self._lock:
            self._counts.clear()


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="scriptable test origin")
    ap.add_argument("--port", type=int, default=8081)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--root")
    ap.add_argument("--live", action="append", default=[])
    a = ap.parse_args(argv)
    o = Origin(root=a.root, port=a.port, host=a.host)
    for p in a.live:
        o.live(p)
    o.start()
    print("origin on %s" % o.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        o.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
