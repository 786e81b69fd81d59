"""Hostile clients against the real binary on loopback, each while a
checker process fetches a playlist every ~20 ms (alternating fresh and
reused connections) and records latencies: the attack passes when the
checker's p99 stays under the bound with zero errors, the server is alive,
and /stats shows its connections back to baseline afterwards.

  slowhttptest (Debian): slowloris (-H), slow body (-B), slow read with a
  tiny window (-X), the range attack (-R); 10,000 idle connections;
  100,000 pipelined requests on one keep-alive connection (every response,
  in order, RSS bounded).

The checker is a separate process, not a thread: the pipelining client
keeps this process's interpreter busy, and the GIL would then show up in
the checker's latencies as if it were the server's. Figures per attack go
to docs/reliability.md ("Hostile clients"). Bounded: about 2 minutes."""

import json
import os
import re
import resource
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import BIN, TLS, Server, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-hostile-")
PLAYLIST = "/360p/index.m3u8"
ASAN = b"libasan" in subprocess.run(["ldd", BIN], capture_output=True).stdout
# The bound is the server's; under ASan every request costs several times
# more CPU on the same 2 cores, so only that build gets a wider one.
P99_BOUND_MS = 150.0 if ASAN else 50.0
IDLE_CONNS = 10000
PIPELINED = 100000
# 10,000 idle connections may all land on one of the two workers
# (max_connections is split evenly), plus the checker and slack.
EXTRA = "limits:\n  max_connections: %d\n" % (2 * (IDLE_CONNS + 1000))
RESULTS = []  # one line per attack, printed at the end for docs/reliability.md


# -- the checker ---------------------------------------------------------------

def checker_main(port, interval=0.02, max_seconds=120):
    """Runs in its own process until stdin closes (or max_seconds): one GET
    of PLAYLIST per tick, alternating a fresh connection and a reused
    keep-alive one; prints {"lat_ms": [...], "errors": [...]} as JSON."""
    lat, errors, slow, reused = [], [], [], None
    want = None
    deadline = time.time() + max_seconds
    i = 0
    while time.time() < deadline:
        r, _, _ = select.select([sys.stdin], [], [], interval)
        if r:
            break
        fresh = i % 2 == 0
        i += 1
        t0 = time.perf_counter()
        try:
            if fresh or reused is None:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                if not fresh:
                    reused = s
            else:
                s = reused
            s.sendall(b"GET %s HTTP/1.1\r\nHost: checker\r\n\r\n" % PLAYLIST.encode())
            body = _read_one(s)
            lat.append((time.perf_counter() - t0) * 1000.0)
            if lat[-1] > 10:  # when the slow ones happened, to tell attack phases apart
                slow.append((round(time.time(), 3), round(lat[-1], 1), "fresh" if fresh else "reused"))
            if want is None:
                want = body
            if body != want:
                errors.append("body of %d bytes differs" % len(body))
            if fresh:
                s.close()
        except Exception as e:  # any failure of a normal viewer is an error
            errors.append("%s: %s" % ("fresh" if fresh else "reused", e))
            if not fresh and reused is not None:
                reused.close()
            reused = None
    if reused is not None:
        reused.close()
    print(json.dumps({"lat_ms": lat, "errors": errors[:20], "nerrors": len(errors), "slow": slow[:50]}), flush=True)


def _read_one(s):
    """One 200 response's body (Content-Length framed) from s."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError("closed before the response head")
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 200 "):
        raise ValueError("status line %r" % head.split(b"\r\n", 1)[0])
    n = None
    for line in head.split(b"\r\n")[1:]:
        k, v = line.split(b":", 1)
        if k.strip().lower() == b"content-length":
            n = int(v)
    if n is None:
        raise ValueError("no Content-Length")
    while len(body) < n:
        d = s.recv(65536)
        if not d:
            raise EOFError("closed mid-body")
        body += d
    if len(body) != n:
        raise ValueError("%d bytes past the body" % (len(body) - n))
    return body


class Checker:
    def __init__(self, srv):
        self.proc = subprocess.Popen([sys.executable, __file__, "--checker", str(srv.port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def stop(self):
        out, _ = self.proc.communicate(b"stop\n", timeout=30)
        res = json.loads(out)
        lat = sorted(res["lat_ms"])
        expect(len(lat) >= 25, "the checker made only %d requests" % len(lat))  # the pipelining takes ~1 s
        res["n"] = len(lat)
        res["p50"] = lat[len(lat) // 2]
        res["p99"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        res["max"] = lat[-1]
        return res


def vm_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def under_attack(srv, name, attack):
    """under_attack_once, and once more when only the checker's p99 was over
    the bound: a shared or busy 2-CPU box (CI runs other tests beside this
    one) can starve the checker for a moment; a server that stalls under
    the attack misses it both times."""
    global RETRY_P99
    RETRY_P99 = True
    try:
        return under_attack_once(srv, name, attack)
    except SlowChecker as e:
        print("%s; measuring that attack once more" % e, flush=True)
    RETRY_P99 = False
    return under_attack_once(srv, name + " (again)", attack)


class SlowChecker(Exception):
    pass


RETRY_P99 = False


def under_attack_once(srv, name, attack):
    """Runs attack() (returns a dict of what it measured) while the checker
    runs; then checks the checker, the server's liveness and its
    connection counters, and records the figures."""
    base = stats(srv)["connections"]["active"]
    rss0 = vm_rss_kb(srv.proc.pid)
    chk = Checker(srv)
    time.sleep(0.3)  # the checker is measuring before the attack starts
    try:
        measured = attack()
    finally:
        res = chk.stop()
    rss1 = vm_rss_kb(srv.proc.pid)
    expect(srv.proc.poll() is None, "%s: the server died" % name)
    wait_for(lambda: stats(srv)["connections"]["active"] == base, 20,
             "%s: active connections back to %d" % (name, base))
    line = "%-22s checker n=%d p50=%.1fms p99=%.1fms max=%.1fms errors=%d rss %d->%d KiB %s" % (
        name, res["n"], res["p50"], res["p99"], res["max"], res["nerrors"], rss0, rss1,
        " ".join("%s=%s" % kv for kv in measured.items() if kv[0] != "phases"))
    RESULTS.append(line)
    print(line, flush=True)
    if res["p99"] >= P99_BOUND_MS:
        print("slow checker requests (time, ms): %r; attack phases: %r" % (res["slow"], measured.get("phases")))
    expect_eq(res["nerrors"], 0, "%s: checker errors %r" % (name, res["errors"]))
    if RETRY_P99 and res["p99"] >= P99_BOUND_MS:
        raise SlowChecker("%s: checker p99 %.1f ms over %.0f ms" % (name, res["p99"], P99_BOUND_MS))
    expect(res["p99"] < P99_BOUND_MS, "%s: checker p99 %.1f ms over %.0f ms" % (name, res["p99"], P99_BOUND_MS))
    expect_eq(srv.get(PLAYLIST).status, 200, "%s: a playlist after the attack" % name)
    return measured, res


# -- slowhttptest -------------------------------------------------------------

def slowhttptest(srv, mode, path, seconds, conns, *more):
    """Runs slowhttptest in mode for seconds with up to conns connections;
    returns what it reported (connected/closed/pending at the end)."""
    cmd = ["slowhttptest", mode, "-u", "http://127.0.0.1:%d%s" % (srv.port, path), "-l", str(seconds),
           "-c", str(conns), "-r", str(max(50, conns // 4)), "-p", "3"] + list(more)
    p = subprocess.run(cmd, capture_output=True, timeout=seconds + 60)
    out = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace"))
    # its last status block: "connected:  N", "closed:  N", "service available: YES|NO"
    got = {}
    for line in out.splitlines():
        line = line.strip()
        for key in ("pending", "connected", "error", "closed"):
            if line.startswith(key + ":"):
                got[key] = int(line.split(":", 1)[1])
        m = re.match(r"Test ended on (\d+)", line)
        if m:
            got["ended_s"] = int(m.group(1))
        if line.startswith("Exit status:"):
            got["exit"] = line.split(":", 1)[1].strip()
        if line.startswith("service available:"):
            got["available"] = line.split(":", 1)[1].strip()
    expect("closed" in got, "slowhttptest printed no status:\n%s" % out[-2000:])
    # the tool's own probe must never have found the service down
    expect("NO" not in got.get("available", "YES"), "slowhttptest saw the service unavailable:\n%s" % out[-2000:])
    # the counts are of its last status line; the end says why it stopped
    return {"conns": conns, "closed": got["closed"], "connected": got.get("connected", 0),
            "ended_s": got.get("ended_s"), "exit": repr(got.get("exit"))}


def have_slowhttptest():
    return shutil.which("slowhttptest") is not None


def test_slowloris():
    """Slow headers: one header line every second on 1,000 connections;
    the header timeout (5 s) bounds each of them."""
    with Server(ROOT, workers=2, admin=True, extra=EXTRA + "timeouts:\n  header: 5s\n") as srv:
        m, _ = under_attack(srv, "slowloris (-H)", lambda: slowhttptest(srv, "-H", PLAYLIST, 15, 1000,
                                                                          "-i", "1"))
        expect(m["closed"] > 0 or "No open connections" in m["exit"], "the header timeout closed slowloris connections")
        expect(stats(srv)["errors"]["timeout_header"] > 0, "counted as header timeouts")


def test_slow_body():
    """Slow POST bodies (R-U-Dead-Yet) on 1,000 connections."""
    with Server(ROOT, workers=2, admin=True, extra=EXTRA + "timeouts:\n  header: 5s\n") as srv:
        before = stats(srv)["responses"]["4xx"]
        under_attack(srv, "slow body (-B)", lambda: slowhttptest(srv, "-B", PLAYLIST, 15, 1000,
                                                                   "-i", "1", "-s", "65536"))
        # a POST is answered 405 at once and closed, never waited on for its body
        expect(stats(srv)["responses"]["4xx"] - before >= 900, "slow bodies answered 405")


def test_slow_read():
    """Slow read: a window of 1..64 bytes, reading 32 bytes a second, on
    1,000 connections asking for a large segment several times each."""
    with Server(ROOT, workers=2, admin=True, extra=EXTRA + "timeouts:\n  send: 5s\n") as srv:
        under_attack(srv, "slow read (-X)", lambda: slowhttptest(srv, "-X", "/misc/big.ts", 15, 1000,
                                                                   "-w", "1", "-y", "64", "-n", "1",
                                                                   "-z", "32", "-k", "3"))


def test_range_attack():
    """The Apache-killer Range header (hundreds of overlapping ranges) on
    1,000 connections."""
    with Server(ROOT, workers=2, admin=True, extra=EXTRA) as srv:
        st0 = stats(srv)
        under_attack(srv, "range attack (-R)", lambda: slowhttptest(srv, "-R", "/misc/big.ts", 10, 1000,
                                                                      "-a", "10", "-b", "3000"))
        st1 = stats(srv)
        # no multipart amplification: at most one copy of the file per request
        reqs = st1["requests"]["total"] - st0["requests"]["total"]
        size = os.path.getsize(os.path.join(ROOT, "misc/big.ts"))
        expect(reqs > 0 and st1["bytes_out"] - st0["bytes_out"] <= reqs * (size + 4096),
               "range requests sent %d bytes for %d requests" % (st1["bytes_out"] - st0["bytes_out"], reqs))


# -- many connections, many requests ---------------------------------------------

def test_10000_idle_connections():
    """10,000 connections that send nothing, all held by the server at once
    (header timeout 60 s), then closed."""
    need = IDLE_CONNS + 200
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < need + 100:
        raise AssertionError("RLIMIT_NOFILE hard limit %d is below the %d this test needs" % (hard, need))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need + 100), hard))
    with Server(ROOT, workers=2, admin=True, extra=EXTRA + "timeouts:\n  header: 60s\n") as srv:
        def attack():
            socks = []
            t0 = time.time()
            phases = [("connecting", round(t0, 3))]
            try:
                for _ in range(IDLE_CONNS):
                    s = socket.socket()
                    s.settimeout(10)
                    s.connect(("127.0.0.1", srv.port))
                    socks.append(s)
                connect_s = time.time() - t0
                phases = [("connected", round(time.time(), 3))]
                # all of them accepted, not just queued in the backlog
                wait_for(lambda: stats(srv)["connections"]["active"] >= IDLE_CONNS, 30,
                         "%d connections active" % IDLE_CONNS)
                active = stats(srv)["connections"]["active"]
                rss = vm_rss_kb(srv.proc.pid)
                time.sleep(3)  # the checker keeps measuring with all of them open
                expect(all(_still_open(s) for s in socks[::97]), "idle connections still open")
            finally:
                phases.append(("closing", round(time.time(), 3)))
                for s in socks:
                    s.close()
                phases.append(("closed", round(time.time(), 3)))
            return {"phases": phases, "conns": IDLE_CONNS, "active_peak": active, "connect_s": "%.1f" % connect_s,
                    "rss_held_kib": rss}
        under_attack(srv, "10000 idle conns", attack)


def _still_open(s):
    s.setblocking(False)
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def _responses(buf, want, i):
    """Consumes complete responses from buf (a bytearray), checking each
    against want[i % len(want)]; returns (responses consumed, i)."""
    n = 0
    pos = 0
    while True:
        end = buf.find(b"\r\n\r\n", pos)
        if end < 0:
            break
        head = bytes(buf[pos:end])
        cl = head.find(b"\r\nContent-Length: ")
        expect(cl >= 0 and head.startswith(b"HTTP/1.1 200 "), "response %d: head %r" % (i, head[:200]))
        length = int(head[cl + 18:head.index(b"\r\n", cl + 2)])
        if len(buf) < end + 4 + length:
            break
        body = bytes(buf[end + 4:end + 4 + length])
        exp = want[i % len(want)]
        if body != exp:
            raise AssertionError("response %d out of order or wrong: %d bytes, expected %d" % (i, length, len(exp)))
        pos = end + 4 + length
        n += 1
        i += 1
    del buf[:pos]
    return n, i


def test_100000_requests_one_connection():
    """100,000 GETs pipelined in batches of 500 on one keep-alive
    connection, cycling over files of distinct bodies: every response
    arrives, in order, and the server's RSS stays bounded."""
    paths = ["/master.m3u8", "/360p/index.m3u8", "/misc/subs.vtt", "/misc/aes.key", "/misc/blob.bin",
             "/misc/init.mp4", "/misc/audio.aac"]
    want = []
    for p in paths:
        with open(os.path.join(ROOT, p[1:]), "rb") as f:
            want.append(f.read())
    expect(len(set(want)) == len(want), "the bodies are distinct")
    reqs = [b"GET %s HTTP/1.1\r\nHost: pipeline\r\n\r\n" % p.encode() for p in paths]
    batch = 500
    with Server(ROOT, workers=2, admin=True, extra=EXTRA) as srv:
        def attack():
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            buf = bytearray()
            done = 0
            rss = []
            t0 = time.time()
            deadline = t0 + 90
            try:
                while done < PIPELINED:
                    expect(time.time() < deadline, "100,000 requests within 90 s (%d done)" % done)
                    k = min(batch, PIPELINED - done)
                    s.sendall(b"".join(reqs[(done + j) % len(reqs)] for j in range(k)))
                    got = 0
                    while got < k:
                        d = s.recv(1 << 20)
                        expect(d, "the server closed the connection after %d responses" % (done + got))
                        buf += d
                        n, _ = _responses(buf, want, done + got)
                        got += n
                    expect_eq(got, k, "responses in batch")
                    done += k
                    if done % 20000 == 0:
                        rss.append(vm_rss_kb(srv.proc.pid))
                expect_eq(len(buf), 0, "nothing past the last response")
            finally:
                s.close()
            return {"requests": done, "seconds": "%.1f" % (time.time() - t0),
                    "rss_kib_every_20k": ",".join(str(r) for r in rss)}
        rss0 = vm_rss_kb(srv.proc.pid)
        m, _ = under_attack(srv, "100000 pipelined", attack)
        rss = [int(x) for x in m["rss_kib_every_20k"].split(",")]
        # bounded: no growth with the number of requests once warmed up
        # (ASan's quarantine holds freed memory up to its own cap)
        limit = (64 if ASAN else 8) << 10
        expect(rss[-1] - rss[0] < limit, "RSS grew %d KiB from 20k to 100k requests" % (rss[-1] - rss[0]))
        expect(rss[-1] - rss0 < 4 * limit, "RSS grew %d KiB over the run" % (rss[-1] - rss0))
        expect_eq(stats(srv)["requests"]["total"] >= PIPELINED, True, "the server counted them")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--checker":
        checker_main(int(sys.argv[2]))
        sys.exit(0)
    if TLS:
        print("SKIP: hostile-client tests speak plain HTTP (slowhttptest has no TLS)")
        sys.exit(77)
    if not have_slowhttptest():
        print("SKIP: slowhttptest not installed (bash scripts/setup.sh)")
        sys.exit(77)
    ROOT = make_library(os.path.join(TMP, "lib"), big_mb=8)
    rc = run_main(globals(), TMP, only=sys.argv[1:] or None)
    print("\n".join(RESULTS))
    sys.exit(rc)
