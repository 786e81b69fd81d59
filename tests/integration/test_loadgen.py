#!/usr/bin/env python3
"""Integration test for hlsedge-loadgen: runs it against a real HTTP server
on loopback and checks that its counts match what the server logged.

Until hlsedge's /stats is there this uses Debian's nginx, started here on a
free port over a small library made with ffmpeg (two renditions, one of them
a single file addressed by byte ranges). Exit 77 (skip) when nginx or ffmpeg
is missing. Env: HE_LOADGEN (the binary), HE_SRC (the repository)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from he import free_port  # noqa: E402

LOADGEN = os.environ.get("HE_LOADGEN", "")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    else:
        print("ok:", what, flush=True)


def make_library(root):
    """Master with two renditions: 'lo' (segment files) and 'br' (one file,
    byte ranges), plus a 'live' media playlist without ENDLIST."""
    src = ["-f", "lavfi", "-i", "testsrc2=size=160x90:rate=10", "-f", "lavfi", "-i",
           "sine=frequency=440", "-t", "6", "-c:v", "libx264", "-preset", "ultrafast",
           "-g", "10", "-c:a", "aac", "-b:a", "32k", "-f", "hls", "-hls_time", "1",
           "-hls_playlist_type", "vod"]
    for name, extra in (("lo", []), ("br", ["-hls_flags", "single_file"])):
        d = os.path.join(root, name)
        os.makedirs(d)
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y"] + src + extra +
                       [os.path.join(d, "index.m3u8")], check=True, timeout=120)
    with open(os.path.join(root, "master.m3u8"), "w") as f:
        f.write("#EXTM3U\n#EXT-X-VERSION:4\n"
                "#EXT-X-STREAM-INF:BANDWIDTH=200000,RESOLUTION=160x90\nlo/index.m3u8\n"
                "#EXT-X-STREAM-INF:BANDWIDTH=400000,RESOLUTION=160x90\nbr/index.m3u8\n")
    with open(os.path.join(root, "broken.m3u8"), "w") as f:
        f.write("this is not a playlist\n")
    return sorted(x for x in os.listdir(os.path.join(root, "lo")) if x.endswith(".ts"))


def start_nginx(tmp, root, port):
    conf = os.path.join(tmp, "nginx.conf")
    log = os.path.join(tmp, "access.log")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{
  log_format lg '$status $body_bytes_sent $bytes_sent "$request" "$http_range"';
  access_log {log} lg;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  types {{ application/vnd.apple.mpegurl m3u8; video/mp2t ts; }}
  keepalive_requests 100000;
  server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
""")
    p = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p, log
        except OSError:
            if p.poll() is not None:
                raise RuntimeError("nginx failed: " + p.stderr.read().decode())
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


class LiveWriter(threading.Thread):
    """A live media playlist: a window of 3 one-second segments that slides
    by one each second (reusing the VOD segment files in a cycle)."""

    def __init__(self, path, segs):
        super().__init__(daemon=True)
        self.path, self.segs, self.seq = path, segs, 0
        self.stopped = threading.Event()
        self.write()

    def write(self):
        body = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:1",
                f"#EXT-X-MEDIA-SEQUENCE:{self.seq}"]
        for s in range(self.seq, self.seq + 3):
            body += ["#EXTINF:1.000,", self.segs[s % len(self.segs)]]
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(body) + "\n")
        os.rename(tmp, self.path)

    def run(self):
        while not self.stopped.wait(1.0):
            self.seq += 1
            self.write()


class Log:
    """Reads the access log lines added since the last call."""

    def __init__(self, path):
        self.path, self.pos = path, 0

    def new(self):
        time.sleep(0.3)  # nginx logs right after the last byte is sent
        with open(self.path) as f:
            f.seek(self.pos)
            data = f.read()
            self.pos = f.tell()
        out = []
        for line in data.splitlines():
            parts = line.split(" ", 3)
            out.append({"status": int(parts[0]), "body": int(parts[1]), "bytes": int(parts[2]),
                        "rest": parts[3]})
        return out


def loadgen(*args, timeout=60):
    p = subprocess.run([LOADGEN] + list(args), capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def run_json(*args):
    rc, out, err = loadgen("--json", "-q", *args)
    try:
        return rc, json.loads(out), err
    except ValueError:
        print(out, err)
        return rc, None, err


def main():
    if not LOADGEN or not os.access(LOADGEN, os.X_OK):
        print("HE_LOADGEN not set or not executable; skipping")
        return 77
    if not shutil.which("nginx") or not shutil.which("ffmpeg"):
        print("nginx or ffmpeg missing; skipping")
        return 77
    tmp = tempfile.mkdtemp(prefix="he_lg_it_")
    os.chmod(tmp, 0o755)  # nginx's workers may run as another user when we are root
    nginx = None
    try:
        root = os.path.join(tmp, "lib")
        segs = make_library(root)
        port = free_port()
        nginx, logpath = start_nginx(tmp, root, port)
        log = Log(logpath)
        base = f"http://127.0.0.1:{port}"

        # 1. HLS at line rate, bounded by request count: exact agreement
        rc, j, err = run_json("--viewers", "3", "--pace", "linerate", "-n", "60",
                              "--rendition", "fixed:0", base + "/master.m3u8")
        entries = log.new()
        check(rc == 0 and j is not None, f"hls linerate run exits 0 (rc={rc}, {err.strip()[-200:]})")
        if j:
            check(j["requests"] == 60, f"60 requests made ({j['requests']})")
            check(len(entries) == j["requests"], f"server logged {len(entries)} == loadgen {j['requests']}")
            check(sum(e["bytes"] for e in entries) == j["bytes"],
                  f"bytes: server sent {sum(e['bytes'] for e in entries)} == loadgen received {j['bytes']}")
            check(sum(e["body"] for e in entries) == j["body_bytes"], "body bytes agree")
            check(j["status"].get("200") == sum(1 for e in entries if e["status"] == 200), "status 200 counts agree")
            nseg = sum(1 for e in entries if ".ts " in e["rest"])
            check(j["segments"] == nseg, f"segments {j['segments']} == logged .ts {nseg}")
            check(j["errors"] == 0 and j["segment_download"]["count"] == j["segments"], "no errors, a download time per segment")
            # VOD loops: more segments than the playlist holds means it wrapped
            check(nseg > len(segs), f"VOD looped ({nseg} segments > {len(segs)} in the playlist)")

        # 2. byte ranges (single-file rendition): 206s with a Range header
        rc, j, err = run_json("--viewers", "2", "--pace", "linerate", "-n", "20",
                              "--rendition", "fixed:1", base + "/master.m3u8")
        entries = log.new()
        ranged = [e for e in entries if e["status"] == 206]
        check(rc == 0 and j and j["status"].get("206") == len(ranged) and len(ranged) > 0,
              f"byte-range segments: {len(ranged)} 206s logged, loadgen {j and j['status']}")
        check(all('"bytes=' in e["rest"] for e in ranged), "each 206 was asked with Range: bytes=")
        if j:
            check(j["bytes"] == sum(e["bytes"] for e in entries), "byte-range run: bytes agree")

        # 3. URL list mode, like wrk: every URL, counts and bytes agree
        urls = [f"{base}/lo/{s}" for s in segs]
        rc, j, err = run_json("-c", "4", "-n", "100", *urls)
        entries = log.new()
        check(rc == 0 and j and j["mode"] == "urls" and j["requests"] == 100, "urls mode: 100 requests")
        check(len(entries) == 100 and j and sum(e["bytes"] for e in entries) == j["bytes"],
              "urls mode: server log agrees on count and bytes")
        check(j and j["connects"] == 4, f"keep-alive: 4 connections for 100 requests ({j and j['connects']})")

        # 4. --verify and --no-trunc read the bytes and agree with discarding
        rc, j, err = run_json("-c", "2", "-n", "40", "--verify", *urls)
        log.new()
        check(rc == 0 and j and j["verify"]["checked"] == 40 and j["verify"]["mismatched_urls"] == 0,
              "verify: 40 bodies checked, consistent")
        rc, j2, err = run_json("-c", "2", "-n", "40", "--no-trunc", *urls)
        log.new()
        check(rc == 0 and j2 and j and j2["body_bytes"] == j["body_bytes"], "no-trunc receives the same bytes")

        # 5. live: re-polls the media playlist each target duration, follows
        # new segments at real time without stalling
        live = LiveWriter(os.path.join(root, "lo", "live.m3u8"), segs)
        live.start()
        rc, j, err = run_json("--viewers", "2", "-d", "4.5", base + "/lo/live.m3u8")
        live.stopped.set()
        entries = log.new()
        polls = sum(1 for e in entries if "live.m3u8" in e["rest"])
        check(rc == 0 and j is not None, f"live run exits 0 (rc={rc})")
        check(polls >= 7, f"live playlist polled about once a second per viewer ({polls} in 4.5 s)")
        check(j and j["segments"] >= 2 * 6, f"live: new segments followed ({j and j['segments']})")
        check(j and len(entries) == j["requests"], f"live: server logged {len(entries)} == loadgen {j and j['requests']}")
        check(j and j["stalls"] == 0 and j["play_s"] > 0, f"live real time: plays without stalls ({j and j['stalls']})")

        # 6. real-time pace is paced: with a 2 s buffer, about 1 segment/s per viewer
        rc, j, err = run_json("--viewers", "2", "-d", "4", "--buffer", "2", "--rendition", "fixed:0",
                              base + "/master.m3u8")
        entries = log.new()
        check(rc == 0 and j and 4 <= j["segments"] <= 16, f"realtime pacing: {j and j['segments']} segments in 4 s")
        check(j and len(entries) == j["requests"], "realtime: server log agrees")

        # 7. errors: 404s and a broken playlist make exit status 1, with kinds
        rc, j, err = run_json("-c", "1", "-n", "5", base + "/missing.ts")
        log.new()
        check(rc == 1 and j and j["error_kinds"].get("http_status") == 5 and j["status"].get("404") == 5,
              "404s: exit 1, five http_status errors")
        rc, j, err = run_json("--viewers", "1", "-d", "1.5", base + "/broken.m3u8")
        log.new()
        check(rc == 1 and j and j["error_kinds"].get("playlist", 0) >= 1, "a malformed playlist: a playlist error, no crash")
        p = free_port()
        rc, j, err = run_json("-c", "1", "-d", "1", f"http://127.0.0.1:{p}/x.ts")
        check(rc == 1 and j and j["error_kinds"].get("connect", 0) >= 1, "connection refused counted")

        # 8. bad arguments: exit 2 with a clear message
        rc, out, err = loadgen("--viewers", "zero", base + "/master.m3u8")
        check(rc == 2 and "--viewers" in err and "--help" in err, f"bad argument: exit 2 ({err.strip()})")
        rc, out, err = loadgen()
        check(rc == 2 and "no URL" in err, "no URL: exit 2")
        rc, out, err = loadgen("--help")
        check(rc == 0 and "usage:" in out, "--help prints usage")

        # 9. sweep: reports the best point within the SLA
        rc, j, err = run_json("--sweep", "1:3:1", "--sla-ms", "10000", "-d", "0.5", *urls[:2])
        log.new()
        check(rc == 0 and j and len(j["sweep"]) == 3 and j["best"] is not None, "sweep: three points and a best")

        # 10. the text summary has the promised parts
        rc, out, err = loadgen("-q", "--viewers", "2", "--pace", "linerate", "-n", "10", base + "/master.m3u8")
        log.new()
        for part in ("requests", "ttfb", "p99.9", "segment", "renditions", "status", "errors"):
            check(part in out, f"summary shows {part}")
    finally:
        if nginx:
            nginx.terminate()
            try:
                nginx.wait(timeout=5)
            except subprocess.TimeoutExpired:
                nginx.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
