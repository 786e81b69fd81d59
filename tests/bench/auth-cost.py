#!/usr/bin/env python3
"""What signed URLs cost per playlist request: the token check plus the
rewrite of the playlist (the token carried into every URI), against the
same request to a server without auth rules (the token then is just an
unknown query parameter). Two playlists: a 5-variant master and a
1,000-segment VOD media playlist, both from root (the file handler's
in-memory bodies, so the rest of a request costs as little as it can and
the auth share shows most).

Two hlsedge processes, one worker each, both pinned to SERVER_CPU (0), and
wrk pinned to CLIENT_CPU (1) loads them in turn, SLICE seconds each,
alternating which goes first; a run is ROUNDS rounds, and RUNS runs (fresh
servers) give the median. The figure is the server process's CPU time
(utime + stime from /proc/PID/stat, the control thread included) per
request wrk completed; and, since a round measures the servers back to
back, the median over all rounds of auth against same-bytes within the
round, which cancels the host's drift between rounds.

    python3 tests/bench/auth-cost.py            # RUNS=5 ROUNDS=3 SLICE=2
    TOKENS=1000 python3 tests/bench/auth-cost.py

TOKENS (default 1): wrk cycles through that many distinct valid tokens (a
Lua script), the same for every server. One token is the steady state of
a player (its token verified and its playlist rewritten once, then kept
per worker: server/handler/auth_cache.c); more tokens than a worker keeps
(64) make every auth request a miss: the HMAC and the rewrite each time.
"""

import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
from he_token import edgeauth  # noqa: E402

BIN = os.environ.get("HE_BIN", os.path.join(SRC, "build", "hlsedge"))
SERVER_CPU = int(os.environ.get("SERVER_CPU", "0"))
CLIENT_CPU = int(os.environ.get("CLIENT_CPU", "1"))
RUNS = int(os.environ.get("RUNS", "5"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SLICE = float(os.environ.get("SLICE", "2"))
CONNS = int(os.environ.get("CONNS", "16"))
TOKENS = int(os.environ.get("TOKENS", "1"))
KEY = "6b2c1f0e9d8a7b6c5d4e3f2a1b0c9d8e"
TICK = os.sysconf("SC_CLK_TCK")


def library(root):
    os.makedirs(os.path.join(root, "v"), exist_ok=True)
    m = ["#EXTM3U", "#EXT-X-VERSION:3"]
    for i, (bw, res) in enumerate([(400000, "512x288"), (800000, "640x360"), (1500000, "1024x576"),
                                   (3000000, "1280x720"), (6000000, "1920x1080")]):
        m += ['#EXT-X-STREAM-INF:BANDWIDTH=%d,RESOLUTION=%s,CODECS="avc1.64001f,mp4a.40.2"' % (bw, res),
              "v%d/index.m3u8" % i]
    with open(os.path.join(root, "master.m3u8"), "w") as f:
        f.write("\n".join(m) + "\n")
    media = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:6", "#EXT-X-PLAYLIST-TYPE:VOD"]
    for n in range(1000):
        media += ["#EXTINF:6.000000,", "seg_%05d.ts" % n]
    media.append("#EXT-X-ENDLIST")
    with open(os.path.join(root, "v", "index.m3u8"), "w") as f:
        f.write("\n".join(media) + "\n")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(d, root, auth):
    port = free_port()
    conf = os.path.join(d, "auth.yaml" if auth else "plain.yaml")
    with open(conf, "w") as f:
        f.write('listen: ["127.0.0.1:%d"]\nworkers: 1\ncpus: [%d]\ncontrol_cpus: [%d]\nroot: %s\n'
                'admin:\n  listen: "off"\nfd_cache:\n  entries: 64\n' % (port, SERVER_CPU, SERVER_CPU, root))
        if auth:
            f.write('auth:\n  - prefix: /\n    keys: ["%s"]\n    propagate: true\n' % KEY)
    p = subprocess.Popen(["taskset", "-c", str(SERVER_CPU), BIN, "-c", conf], stdout=subprocess.DEVNULL,
                         stderr=open(conf + ".log", "w"))
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("hlsedge did not start: " + open(conf + ".log").read())


def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


SCRIPT = None  # the Lua script cycling through TOKENS tokens, when TOKENS > 1


def wrk(port, target):
    args = ["taskset", "-c", str(CLIENT_CPU), "wrk", "-t1", "-c%d" % CONNS, "-d%gs" % SLICE]
    if SCRIPT:
        args += ["-s", SCRIPT]
    out = subprocess.run(args + ["http://127.0.0.1:%d%s" % (port, target)], capture_output=True,
                         text=True).stdout
    m = re.search(r"(\d+) requests in", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if not m or bad:
        raise SystemExit("wrk: " + out)
    return int(m.group(1))


def one_run(d, root, target, same_target):
    servers = {"plain": start(d, root, False), "auth": start(d, root, True), "same": start(d, root, False)}
    targets = {"plain": target, "auth": target, "same": same_target}
    per = {k: [] for k in servers}
    try:
        for r in range(ROUNDS):
            order = ["plain", "auth", "same"][r % 3:] + ["plain", "auth", "same"][:r % 3]
            for mode in order:
                p, port = servers[mode]
                c0 = cpu(p.pid)
                n = wrk(port, targets[mode])
                time.sleep(0.2)
                per[mode].append((cpu(p.pid) - c0) / n * 1e6)
    finally:
        for p, _ in servers.values():
            p.send_signal(signal.SIGTERM)
            p.wait(10)
    med = {k: statistics.median(v) for k, v in per.items()}
    # each round measures the three back to back: the ratio within a round
    # cancels the machine's drift between rounds (a busy host's steal)
    med["pairs"] = [(a - b) / b for a, b in zip(per["auth"], per["same"])]
    return med


def main():
    if not shutil.which("wrk") or not shutil.which("taskset"):
        print("needs wrk and taskset")
        return 77
    d = tempfile.mkdtemp(prefix="he-auth-bench-")
    root = os.path.join(d, "lib")
    library(root)
    global SCRIPT
    tok = edgeauth(KEY, exp=int(time.time()) + 86400, acl="/*")
    q = "?__token__=" + tok  # the same bytes go to both servers
    if TOKENS > 1:
        # same length as tok, so the bodies are the same size; the target
        # wrk is given supplies the path, the script the token
        toks = [edgeauth(KEY, exp=int(time.time()) + 86400 + i, acl="/*") for i in range(TOKENS)]
        SCRIPT = os.path.join(d, "tokens.lua")
        with open(SCRIPT, "w") as f:
            f.write("local toks = {%s}\nlocal i = 0\n" % ",".join('"%s"' % t for t in toks))
            f.write("request = function()\n  i = i % #toks + 1\n"
                    "  local p = wrk.path:gsub(\"%?.*$\", \"\")\n"
                    "  return wrk.format(nil, p .. \"?__token__=\" .. toks[i])\nend\n")
    try:
        # "same": a server without auth sending a stored copy of the
        # tokenised playlist, the same bytes the auth server sends: the
        # check and the rewrite alone, without the larger body's send
        for name, path in (("master (5 variants)", "/master.m3u8"), ("media (1,000 segments)", "/v/index.m3u8")):
            body = open(os.path.join(root, path.lstrip("/"))).read()
            tokd = "\n".join(l + q if l and not l.startswith("#") else l for l in body.split("\n"))
            same = path.replace(".m3u8", ".tokenised.m3u8")
            with open(os.path.join(root, same.lstrip("/")), "w") as f:
                f.write(tokd)
            runs = [one_run(d, root, path + q, same + q) for _ in range(RUNS)]
            med = {k: statistics.median(r[k] for r in runs) for k in ("plain", "auth", "same")}
            print("%-23s plain %6.2f  auth %6.2f  same-bytes %6.2f us/req;  auth - plain %+6.2f us (%+.1f%%),"
                  "  auth - same-bytes %+6.2f us (%+.1f%%)"
                  % (name, med["plain"], med["auth"], med["same"], med["auth"] - med["plain"],
                     (med["auth"] - med["plain"]) / med["plain"] * 100, med["auth"] - med["same"],
                     (med["auth"] - med["same"]) / med["same"] * 100))
            print("    runs plain/auth/same: " + " ".join("%.1f/%.1f/%.1f" % (r["plain"], r["auth"], r["same"])
                                                      for r in runs))
            pairs = sorted(p for r in runs for p in r["pairs"])
            print("    auth - same-bytes within each round: median %+.1f%%, quartiles %+.1f%% .. %+.1f%% (%d rounds)"
                  % (statistics.median(pairs) * 100, pairs[len(pairs) // 4] * 100,
                     pairs[(3 * len(pairs)) // 4] * 100, len(pairs)))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
