#!/usr/bin/env python3
"""What an LL-HLS audience behind the edge costs the origin: for "Live and
Low-Latency HLS at the edge", the requirement "1,000 LL viewers on one
rendition through the edge in front of the origin: the origin sees at most
one playlist request per playlist update, and one request per part",
measured, beside nginx in front of the same origin with the same viewers.

The origin is the LL-HLS test source as an HTTP origin
(tests/integration/he_llsource.py, LLOrigin: H.264/AAC by ffmpeg, PART_TARGET
1 s parts, 4 parts a segment, a full 10-segment window so deltas can skip).
It answers blocking reloads itself (_HLS_msn/_HLS_part held until the part
is out, 400 and 503 by 6.2.5.2), makes its own delta updates and holds a
preload-hinted part until it exists; it counts every request it gets by
"path?query". It runs in this process (on ORIGIN_CPUS, default 1: beside
the viewers, so the server has CPU 0 to itself) for the whole script.

In front of it, one at a time, in an order that rotates per run:

  hlsedge         HE_BIN, one worker, cpus/control_cpus SERVER_CPU, an empty
                  root, origin.urls the origin; cache.admission false (a
                  live part is asked for by every viewer within a second: a
                  second-request admission rule would send the second one
                  to the origin too), cache.prefetch 0 (the viewers fetch
                  parts; a segment fetched ahead is not the requirement's),
                  origin.read_timeout 20s (over the origin's longest hold,
                  3 target durations = 12 s). Whatever else the binary does
                  with _HLS_ requests is what is measured.
  nginx-lock      nginx at its best for this workload:
                    proxy_cache_key $scheme$proxy_host$uri$is_args$args
                      (the _HLS_ directives in the key: without them every
                      blocking reload would get whichever playlist came
                      first);
                    proxy_cache_lock on; proxy_cache_lock_timeout 15s;
                    proxy_cache_lock_age 15s (one request per key goes to
                      the origin; both above the origin's longest hold of
                      12 s, else a held fill lets a second request through,
                      and a waiter that times out goes uncached);
                    proxy_cache_valid 200 1s only as a fallback: the origin
                      sends Cache-Control max-age on everything and nginx
                      honours it (6 target durations for parts and blocking
                      answers, 2 s for plain playlists);
                    proxy_cache_use_stale updating + proxy_cache_background_
                      update on (an expired plain playlist: one refresh,
                      the rest served the stale copy);
                    proxy_read_timeout 20s (over the 12 s hold);
                    proxy_http_version 1.1, Connection "", upstream
                      keepalive 256 (no connect per fill).
                  nginx's cache lock has no wake-up: a waiter re-checks
                  every 500 ms (ngx_http_file_cache_lock_wait), so its
                  viewers get a fill up to half a second after it lands;
                  the hold and latency columns show what that costs.
  nginx-defaults  the same without proxy_cache_lock (and without the stale
                  rules): every viewer that misses goes to the origin.

Both nginx variants: one worker process on SERVER_CPU, access_log off,
listening on 127.0.0.1 only, started with -p a temporary prefix and
-g 'daemon off;' and stopped by its PID.

The viewers: hlsedge-loadgen --llhls (HE_LOADGEN) on CLIENT_CPU (1),
VIEWERS (1000) joining over RAMP (10s), for DURATION (40s), all on the
first rendition of the origin's master playlist (its media playlist URL
through the server): blocking reloads of the next part with _HLS_skip=YES,
parts, preload hints.

Counted from the origin's request table, what arrived during the run (the
server stopped before the table is read):
  playlist updates  parts the origin published during the loadgen's run
                    (each part updates the playlist);
  playlist requests blocking (_HLS_msn) and plain ones, per update, and
                    the most requests one blocking target (msn, part) got;
                    a viewer takes one part by its preload hint and makes
                    a blocking reload for the next, so one origin request
                    a target is about 0.5 an update, plus the plain
                    playlists of the joins;
  part requests     per distinct part requested: mean and max (1 is the
                    goal); segment requests.
From the loadgen's JSON: live latency (p50), blocking-reload hold (p50,
p99), 400 and 503 answers, part misses and stalls, errors. Also the
server's CPU seconds during the run, and for hlsedge its /stats
cache.origin_requests and cache.coalesced_waiters. RUNS (3) runs: the
median with the range over runs; the last table is markdown for
docs/performance.md.

    python3 tests/bench/llhls-origin.py                 # about 7 minutes
    VIEWERS=50 DURATION=15 RUNS=1 python3 tests/bench/llhls-origin.py
    SERVERS=hlsedge,nginx-lock HE_BIN=/path/to/hlsedge python3 tests/bench/llhls-origin.py

Needs ffmpeg, nginx and taskset; a benchmark, not part of the test suite.
"""

import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import he_llsource as ll  # noqa: E402
from he import free_port  # noqa: E402

BIN = os.environ.get("HE_BIN", os.path.join(SRC, "build", "hlsedge"))
LOADGEN = os.environ.get("HE_LOADGEN", os.path.join(os.path.dirname(os.path.abspath(BIN)), "hlsedge-loadgen"))
NGINX = os.environ.get("NGINX", "nginx")
SERVER_CPU = int(os.environ.get("SERVER_CPU", "0"))
CLIENT_CPU = int(os.environ.get("CLIENT_CPU", "1"))
ORIGIN_CPUS = os.environ.get("ORIGIN_CPUS", str(CLIENT_CPU))  # "" = unpinned
VIEWERS = int(os.environ.get("VIEWERS", "1000"))
RAMP = os.environ.get("RAMP", "10s")
DURATION = os.environ.get("DURATION", "40s")
RUNS = int(os.environ.get("RUNS", "3"))
PART_TARGET = float(os.environ.get("PART_TARGET", "1.0"))
PARTS = 4
SERVERS = [s for s in os.environ.get("SERVERS", "hlsedge,nginx-lock,nginx-defaults").split(",") if s]
WORK = os.path.join(SRC, "var", "cache", "ll-source")  # the encoded clips, kept (as the tests keep them)
TICK = os.sysconf("SC_CLK_TCK")
HOLD_MAX = 3  # target durations: the origin's longest hold (6.2.5.2)


def seconds(d):
    """10, 10s, 500ms, 2m -> seconds."""
    m = re.fullmatch(r"([0-9.]+)(ms|s|m)?", d.strip())
    if not m:
        raise SystemExit("not a duration: %r" % d)
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, None: 1}[m.group(2)]


def wait_listening(proc, port, log, what):
    for _ in range(200):  # 10 s
        if proc.poll() is not None:
            raise RuntimeError("%s exited %d at start: %s" % (what, proc.returncode, tail(log)))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not start listening: %s" % (what, tail(log)))


def tail(path, n=2000):
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")
    except OSError:
        return ""


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def cpu_s(pids):
    t = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            t += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return t / TICK


class Running:
    """A server process (and its workers: nginx's) started here, stopped by PID."""

    def __init__(self, name, proc, port, tmp, log, admin_port=0):
        self.name, self.proc, self.port, self.tmp, self.log = name, proc, port, tmp, log
        self.admin_port = admin_port

    def pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def stats(self):
        if not self.admin_port:
            return {}
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/stats" % self.admin_port, timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return {}

    def stop(self):
        kids = children(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for k in kids:  # nginx's workers, should the master have been killed
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def hlsedge_conf(port, admin_port, root, origin):
    return ('listen: ["127.0.0.1:%d"]\nworkers: 1\ncpus: [%d]\ncontrol_cpus: [%d]\nroot: %s\n'
            'admin:\n  listen: "127.0.0.1:%d"\n'
            "cache:\n  ram_size: 256m\n  admission: false\n  prefetch: 0\n"
            'origin:\n  urls: ["%s"]\n  retries: 0\n  connect_timeout: 2s\n  read_timeout: 20s\n'
            "  total_timeout: 30s\n" % (port, SERVER_CPU, SERVER_CPU, root, admin_port, origin))


def start_hlsedge(origin):
    tmp = tempfile.mkdtemp(prefix="he-llorigin-he-")
    root = os.path.join(tmp, "root")  # empty: everything comes from the origin
    os.makedirs(root)
    port, admin_port = free_port(), free_port()
    conf = os.path.join(tmp, "hlsedge.yaml")
    with open(conf, "w") as f:
        f.write(hlsedge_conf(port, admin_port, root, origin))
    log = os.path.join(tmp, "hlsedge.log")
    with open(log, "wb") as lf:
        p = subprocess.Popen(["taskset", "-c", str(SERVER_CPU), BIN, "-c", conf], stdout=lf,
                             stderr=subprocess.STDOUT)
    r = Running("hlsedge", p, port, tmp, log, admin_port)
    try:
        wait_listening(p, port, log, "hlsedge")
    except Exception:
        r.stop()
        raise
    return r


HOLD_S = None  # the origin's longest hold, set in main()

NGINX_LOCK = """\
            proxy_cache_key $scheme$proxy_host$uri$is_args$args;
            proxy_cache_lock on;
            proxy_cache_lock_timeout {lock}s;
            proxy_cache_lock_age {lock}s;
            proxy_cache_valid 200 1s;
            proxy_cache_use_stale updating;
            proxy_cache_background_update on;"""

NGINX_CONF = """\
{user}
worker_processes 1;
worker_cpu_affinity {mask};
worker_rlimit_nofile 16384;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 8192; use epoll; multi_accept on; }}
http {{
    access_log off;
    default_type application/octet-stream;
    keepalive_requests 1000000;
    tcp_nodelay on;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy_temp;
    fastcgi_temp_path {tmp}/fastcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
    proxy_cache_path {tmp}/cache levels=1:2 keys_zone=ll:32m max_size=2g inactive=2m use_temp_path=off;
    upstream origin {{ server {origin}; keepalive 256; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout {read}s;
            proxy_cache ll;
{lock}
        }}
    }}
}}
"""


def nginx_conf(variant, tmp, port, origin_hostport):
    lock = NGINX_LOCK.format(lock=int(HOLD_S + 3)) if variant == "nginx-lock" else ""
    return NGINX_CONF.format(user="user root;" if os.getuid() == 0 else "", mask=bin(1 << SERVER_CPU)[2:],
                             tmp=tmp, origin=origin_hostport, port=port, read=int(HOLD_S + 8), lock=lock)


def start_nginx(variant, origin):
    tmp = tempfile.mkdtemp(prefix="he-llorigin-ng-")
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(nginx_conf(variant, tmp, port, origin.split("//", 1)[1]))
    log = os.path.join(tmp, "error.log")
    with open(os.path.join(tmp, "nginx.out"), "wb") as out:
        p = subprocess.Popen(["taskset", "-c", str(SERVER_CPU), NGINX, "-p", tmp, "-e", log, "-c", conf,
                              "-g", "daemon off;"], stdout=out, stderr=subprocess.STDOUT)
    r = Running(variant, p, port, tmp, log)
    try:
        wait_listening(p, port, log, "nginx")
    except Exception:
        r.stop()
        raise
    return r


def start(variant, origin):
    if variant == "hlsedge":
        return start_hlsedge(origin)
    if variant in ("nginx-lock", "nginx-defaults"):
        return start_nginx(variant, origin)
    raise SystemExit("unknown server %r (hlsedge, nginx-lock, nginx-defaults)" % variant)


def snapshot(o):
    with o.lock:
        return dict(o.requests), len(o.holds)


BLOCKING = re.compile(r"_HLS_msn=(\d+)(?:.*?_HLS_part=(\d+))?")


def classify(diff):
    """Origin requests of one run by kind: blocking targets, plain
    playlists, parts, segments, the rest."""
    c = {"blocking": {}, "plain": 0, "parts": {}, "segments": 0, "other": 0}
    for key, n in diff.items():
        path, _, query = key.partition("?")
        base = path.rsplit("/", 1)[-1]
        if base.endswith(".m3u8") and not base.startswith("master"):
            m = BLOCKING.search(query)
            if m:
                t = (int(m.group(1)), None if m.group(2) is None else int(m.group(2)))
                c["blocking"][t] = c["blocking"].get(t, 0) + n
            else:
                c["plain"] += n
        elif base.startswith("p") and base.endswith(".m4s"):
            c["parts"][path] = c["parts"].get(path, 0) + n
        elif base.startswith("s") and base.endswith(".m4s"):
            c["segments"] += n
        else:
            c["other"] += n
    return c


def one_run(variant, o, st, url_path):
    srv = start(variant, o.url)
    try:
        before, holds0 = snapshot(o)
        cpu0 = cpu_s(srv.pids())
        t0 = time.time()
        newest0 = st.newest(t0)
        url = "http://127.0.0.1:%d%s" % (srv.port, url_path)
        args = ["taskset", "-c", str(CLIENT_CPU), LOADGEN, "--llhls", "--viewers", str(VIEWERS), "--ramp", RAMP,
                "-d", DURATION, "--json", "-q", url]
        p = subprocess.run(args, capture_output=True, text=True, timeout=seconds(DURATION) + 90)
        t1 = time.time()
        newest1 = st.newest(t1)
        cpu1 = cpu_s(srv.pids())
        hs = srv.stats()
        try:
            lg = json.loads(p.stdout)
        except ValueError:
            raise RuntimeError("loadgen rc %d, not JSON: %r %r" % (p.returncode, p.stdout[-500:], p.stderr[-500:]))
    finally:
        srv.stop()
    after, holds1 = snapshot(o)
    diff = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
    c = classify(diff)
    updates = max(1, newest1 - newest0)
    blocking = sum(c["blocking"].values())
    parts = list(c["parts"].values())
    l = lg.get("llhls", {})
    cache = hs.get("cache", {})
    r = {
        "updates": updates,
        "pl_per_update": (blocking + c["plain"]) / updates,
        "blocking": blocking,
        "plain": c["plain"],
        "blocking_targets": len(c["blocking"]),
        "max_per_target": max(c["blocking"].values(), default=0),
        "distinct_parts": len(parts),
        "part_mean": statistics.mean(parts) if parts else 0,
        "part_max": max(parts, default=0),
        "part_requests": sum(parts),
        "segments": c["segments"],
        "other": c["other"],
        "origin_total": sum(diff.values()),
        "latency_p50": l.get("latency", {}).get("p50_s", 0),
        "latency_p90": l.get("latency", {}).get("p90_s", 0),
        "hold_p50": l.get("hold", {}).get("p50_ms", 0),
        "hold_p99": l.get("hold", {}).get("p99_ms", 0),
        "hint_p50": l.get("hint", {}).get("p50_ms", 0),
        "st400": l.get("status_400", 0),
        "st503": l.get("status_503", 0),
        "part_misses": l.get("part_misses", 0),
        "part_stalls": l.get("part_stalls", 0),
        "not_held": l.get("not_held", 0),
        "reloads": l.get("reloads", 0),
        "viewer_parts": l.get("parts", 0),
        "errors": lg.get("errors", 0),
        "error_kinds": lg.get("error_kinds", {}),
        "joins": lg.get("audience", {}).get("joins", 0),
        "cpu_s": cpu1 - cpu0,
        "origin_holds": holds1 - holds0,
        "he_origin_requests": cache.get("origin_requests"),
        "he_coalesced": cache.get("coalesced_waiters"),
    }
    return r


def line(variant, r):
    s = ("  %-15s updates %3d | origin playlists %5d (blocking %5d over %3d targets, max %4d a target; "
         "plain %4d) = %.2f/update | parts %3d distinct, %.2f mean %d max a part | segments %d other %d | "
         "viewers: latency p50 %.2f s, hold p50 %.0f p99 %.0f ms, hint p50 %.0f ms, 400 %d 503 %d, "
         "misses %d stalls %d, not held %d, joins %d, errors %d %s | cpu %.1f s"
         % (variant, r["updates"], r["blocking"] + r["plain"], r["blocking"], r["blocking_targets"],
            r["max_per_target"], r["plain"], r["pl_per_update"], r["distinct_parts"], r["part_mean"], r["part_max"],
            r["segments"], r["other"], r["latency_p50"], r["hold_p50"], r["hold_p99"], r["hint_p50"], r["st400"],
            r["st503"], r["part_misses"], r["part_stalls"], r["not_held"], r["joins"], r["errors"],
            json.dumps(r["error_kinds"]) if r["error_kinds"] else "", r["cpu_s"]))
    if r["he_origin_requests"] is not None:
        s += " | /stats origin_requests %s coalesced_waiters %s" % (r["he_origin_requests"], r["he_coalesced"])
    return s


def cell(rows, key, fmt):
    v = sorted(r[key] for r in rows)
    m = statistics.median(v)
    if len(v) == 1 or v[0] == v[-1]:
        return fmt % m
    return (fmt + " (" + fmt + "-" + fmt + ")") % (m, v[0], v[-1])


def table(results):
    head = ["server", "origin playlist requests / update", "blocking + plain (max a target)",
            "origin requests / distinct part: mean, max", "segments", "latency p50 s",
            "hold p50 / p99 ms", "400 / 503", "part misses / stalls", "errors", "server CPU s"]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for variant, rows in results.items():
        if not rows:
            continue
        out.append("| " + " | ".join([
            variant,
            "**%s**" % cell(rows, "pl_per_update", "%.2f"),
            "%s + %s (%s)" % (cell(rows, "blocking", "%d"), cell(rows, "plain", "%d"),
                              cell(rows, "max_per_target", "%d")),
            "%s, **%s**" % (cell(rows, "part_mean", "%.2f"), cell(rows, "part_max", "%d")),
            cell(rows, "segments", "%d"),
            cell(rows, "latency_p50", "%.2f"),
            "%s / %s" % (cell(rows, "hold_p50", "%.0f"), cell(rows, "hold_p99", "%.0f")),
            "%s / %s" % (cell(rows, "st400", "%d"), cell(rows, "st503", "%d")),
            "%s / %s" % (cell(rows, "part_misses", "%d"), cell(rows, "part_stalls", "%d")),
            cell(rows, "errors", "%d"),
            cell(rows, "cpu_s", "%.1f"),
        ]) + " |")
    return "\n".join(out)


def main():
    global HOLD_S
    bad = [v for v in SERVERS if v not in ("hlsedge", "nginx-lock", "nginx-defaults")]
    if bad:
        print("unknown SERVERS %s (hlsedge, nginx-lock, nginx-defaults)" % ",".join(bad))
        return 2
    tools = ["taskset"] + ([NGINX] if any(v.startswith("nginx") for v in SERVERS) else [])
    for tool in tools:
        if not shutil.which(tool):
            print("SKIP: needs %s" % tool)
            return 77
    for b in ((BIN,) if "hlsedge" in SERVERS else ()) + (LOADGEN,):
        if not os.access(b, os.X_OK):
            print("SKIP: no binary at %s (HE_BIN, HE_LOADGEN)" % b)
            return 77
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 4 * VIEWERS + 1024))
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # the servers and loadgen inherit it
    try:
        clips = ll.encode_clips(WORK, PART_TARGET, PARTS, gop=2 * PART_TARGET)  # ffmpeg, once (kept in var/)
    except ll.SourceError as e:
        print("SKIP: %s" % e)
        return 77
    if ORIGIN_CPUS:
        os.sched_setaffinity(0, {int(x) for x in ORIGIN_CPUS.split(",")})  # the origin's threads inherit it
    st = ll.Stream(clips, PARTS, window=10, backlog=10)
    HOLD_S = HOLD_MAX * st.td
    o = ll.LLOrigin(st).start()
    o.srv.socket.listen(4096)  # http.server's backlog of 5 would drop a stampede's connects
    results = {v: [] for v in SERVERS}
    try:
        with urllib.request.urlopen(o.url + "/master.m3u8", timeout=5) as r:
            first = next(x for x in r.read().decode().splitlines() if x and not x.startswith("#"))
        url_path = "/" + first.lstrip("/")
        print("origin %s: %s, PART-TARGET %.3f s, %d parts a segment, target duration %d s, holds up to %d s"
              % (o.url, url_path, st.pt, PARTS, st.td, HOLD_S))
        print("viewers %d over %s for %s; %d runs; server on CPU %d, loadgen on CPU %d, origin on %s"
              % (VIEWERS, RAMP, DURATION, RUNS, SERVER_CPU, CLIENT_CPU, ORIGIN_CPUS or "any CPU"))
        print("hlsedge %s:\n    %s" % (BIN, hlsedge_conf(0, 0, "EMPTY", o.url).strip().replace("\n", "\n    ")))
        for v in ("nginx-lock", "nginx-defaults"):
            if v in SERVERS:
                loc = nginx_conf(v, "TMP", 0, "ORIGIN").split("location / {", 1)[1].split("}", 1)[0]
                print("%s location /:%s" % (v, "\n    ".join([""] + [x.strip() for x in loc.strip().splitlines()])))
        for run in range(RUNS):
            order = SERVERS[run % len(SERVERS):] + SERVERS[:run % len(SERVERS)]
            print("run %d of %d" % (run + 1, RUNS), flush=True)
            for v in order:
                r = one_run(v, o, st, url_path)
                results[v].append(r)
                print(line(v, r), flush=True)
                time.sleep(2 * st.pt)  # the previous server's last fills done
        print("\nmedian over %d runs (range); %d viewers, %s, PART-TARGET %.0f ms; goal: 1 playlist request "
              "an update, 1 request a part\n" % (RUNS, VIEWERS, DURATION, st.pt * 1000))
        print(table(results))
    finally:
        o.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
