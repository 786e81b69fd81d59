"""Signals and reload through the real binary: SIGHUP with an invalid file
(nothing changes, the error names file:line:col), live keys (visible on a
connection opened before the reload), 200 clients downloading segments
through a live reload and two listener/worker changes without a single
error or truncated body, admin.listen moving, and SIGTERM's drain with
/healthz answering 503. Every wait is bounded."""

import os
import random
import re
import signal
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Conn, Server, expect, expect_eq, free_port, make_library, run_main, sha256  # noqa: E402
from he_admin import admin_get, port_refuses, reload_and_wait, stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-reload-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=16)

# Small segments, so that 200 Python clients make many requests each.
SMALL = []
_rnd = random.Random(99)
os.makedirs(os.path.join(ROOT, "small"), exist_ok=True)
for _i in range(40):
    _data = _rnd.randbytes(_rnd.randint(4000, 48000))
    _p = "/small/s%02d.ts" % _i
    with open(ROOT + _p, "wb") as _f:
        _f.write(_data)
    SMALL.append((_p, sha256(_data)))


def write_conf(srv, listen=None, workers=1, extra=""):
    """Rewrites the server's config file in place (the harness's keys)."""
    listen = listen or srv.listen
    with open(srv.conf, "w") as f:
        f.write("listen: [%s]\n" % ", ".join('"%s"' % l for l in listen))
        f.write("workers: %d\n" % workers)
        f.write("root: %s\n" % ROOT)
        f.write('admin:\n  listen: "127.0.0.1:%d"\n' % srv.admin_port)
        f.write(extra)


def test_invalid_file_changes_nothing():
    with Server(ROOT, admin=True) as srv:
        c = srv.conn()
        cc = c.request("GET", "/master.m3u8").h("cache-control")
        write_conf(srv, extra='cache_control:\n  m3u8: "max-age=5"\ntimeouts:\n  header: banana\n')
        srv.signal(signal.SIGHUP)
        wait_for(lambda: stats(srv)["config"]["reloads_failed"] == 1, what="failed reload counted")
        log = srv.read_log()
        m = re.search(r"reload failed, configuration generation 1 keeps serving: (\S+):(\d+):(\d+): timeouts\.header",
                      log)
        expect(m, "error with file:line:col in the log:\n" + log)
        expect_eq(m.group(1), srv.conf, "file named")
        expect_eq((m.group(2), m.group(3)), ("9", "11"), "line:col of the bad value")
        s = stats(srv)
        expect_eq(s["config"]["generation"], 1, "generation unchanged")
        expect_eq(s["config"]["reloads_ok"], 0, "no successful reload")
        # old configuration keeps serving, on the same connection too
        expect_eq(c.request("GET", "/master.m3u8").h("cache-control"), cc, "Cache-Control unchanged")
        expect_eq(srv.get("/360p/index.m3u8").status, 200, "still serving")
        c.close()
        # a file that cannot be read at all
        os.rename(srv.conf, srv.conf + ".moved")
        srv.signal(signal.SIGHUP)
        wait_for(lambda: stats(srv)["config"]["reloads_failed"] == 2, what="second failed reload")
        os.rename(srv.conf + ".moved", srv.conf)
        expect_eq(srv.get("/master.m3u8").status, 200, "still serving")


def test_live_keys_apply_without_dropping():
    with Server(ROOT, admin=True) as srv:
        c = srv.conn()
        r = c.request("GET", "/master.m3u8")
        expect_eq(r.h("access-control-allow-origin"), "*")
        write_conf(srv, extra='cache_control:\n  m3u8: "public, max-age=2"\ncors:\n  allow_origin: '
                              '"https://player.example"\ntimeouts:\n  keepalive: 30s\nlog:\n  level: debug\n')
        reload_and_wait(srv, 2)
        # the connection opened before the reload is still there and sees it
        wait_for(lambda: c.request("GET", "/master.m3u8").h("cache-control") == "public, max-age=2",
                 what="new Cache-Control on the old connection")
        r = c.request("GET", "/master.m3u8")
        expect_eq(r.h("access-control-allow-origin"), "https://player.example", "new CORS origin")
        c.close()
        s = stats(srv)
        expect_eq(s["config"]["server_generations"], 1, "no new workers for live keys")
        # the worker closes its side when it reads the client's FIN, which
        # may come after the /stats answer: wait for it, bounded
        wait_for(lambda: (lambda c: c["accepted"] - c["closed"])(stats(srv)["connections"]) == 0,
                 what="nothing left open")
        expect("live, same workers" in srv.read_log(), "logged as live")


def client_loop(port, idx, stop, results):
    rnd = random.Random(idx)
    ok = reconnects = 0
    errors = []
    conn = None
    while not stop.is_set():
        path, digest = rnd.choice(SMALL)
        try:
            if conn is None:
                conn = Conn(port, timeout=15)
                reconnects += 1
            r = conn.request("GET", path)
            if r.status != 200:
                raise AssertionError("status %d" % r.status)
            if sha256(r.body) != digest:
                raise AssertionError("body of %d bytes differs" % len(r.body))
            ok += 1
            if (r.h("connection") or "").lower() == "close":
                conn.close()
                conn = None
        except Exception as e:  # any error at all fails the test
            errors.append("%s: %r" % (path, e))
            if conn:
                conn.close()
            conn = None
            time.sleep(0.05)
    if conn:
        conn.close()
    results[idx] = (ok, reconnects, errors)


def test_200_clients_through_reloads():
    with Server(ROOT, admin=True, workers=1, extra="timeouts:\n  drain: 20s\n") as srv:
        port2 = free_port()
        stop = threading.Event()
        results = {}
        threads = [threading.Thread(target=client_loop, args=(srv.port, i, stop, results)) for i in range(200)]
        for t in threads:
            t.start()
        try:
            time.sleep(1.5)
            # 1: live keys only
            write_conf(srv, workers=1, extra='cache_control:\n  ts: "public, max-age=60"\n')
            reload_and_wait(srv, 2)
            time.sleep(1.0)
            # 2: one worker -> two, and a second listen address
            write_conf(srv, listen=srv.listen + ["127.0.0.1:%d" % port2], workers=2)
            reload_and_wait(srv, 3)
            wait_for(lambda: stats(srv)["config"]["server_generations"] == 1, 15, "old generation drained")
            expect_eq(Conn(port2).request("GET", "/master.m3u8").status, 200, "new listen address")
            time.sleep(1.0)
            # 3: back to one worker and one address
            write_conf(srv, workers=1)
            reload_and_wait(srv, 4)
            wait_for(lambda: stats(srv)["config"]["server_generations"] == 1, 15, "old generation drained")
            time.sleep(1.0)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        expect(not any(t.is_alive() for t in threads), "clients finished")
        errors = [e for ok, rc, errs in results.values() for e in errs]
        total = sum(ok for ok, rc, errs in results.values())
        expect_eq(len(results), 200, "clients reporting")
        expect(not errors, "%d client errors, first: %s" % (len(errors), errors[:5]))
        expect(all(ok > 0 for ok, rc, errs in results.values()), "every client made progress")
        expect(total > 1000, "enough responses (%d)" % total)
        s = stats(srv)
        expect_eq(s["config"]["generation"], 4, "generation")
        expect_eq(s["config"]["reloads_ok"], 3, "three reloads")
        expect_eq(len([w for w in s["workers"] if w["generation"]]), 1, "one worker running")
        expect(port_refuses(port2), "removed address no longer listens")
        log = srv.read_log()
        expect_eq(log.count("finished draining"), 2, "both old generations drained")
        expect("drain timeout" not in log, "drained without the timeout")
        bad = [l for l in log.splitlines() if "[warn]" in l or "[error]" in l]
        expect(not bad, "warnings or errors in the log: %s" % bad[:5])
        print("  %d responses, %d connections, 0 errors" % (total, sum(rc for ok, rc, errs in results.values())))


def test_admin_listen_moves():
    with Server(ROOT, admin=True) as srv:
        old = srv.admin_port
        new = free_port()
        srv.admin_port = new
        write_conf(srv)
        srv.signal(signal.SIGHUP)
        wait_for(lambda: not port_refuses(new), what="new admin port")
        expect_eq(stats(srv)["config"]["generation"], 2)
        expect(port_refuses(old), "old admin port closed")
        expect_eq(stats(srv)["config"]["server_generations"], 1, "workers untouched")


def test_sigterm_drains_with_healthz_503():
    with Server(ROOT, admin=True, extra="timeouts:\n  drain: 10s\n") as srv:
        big = open(os.path.join(ROOT, "misc/big.ts"), "rb").read()
        expect_eq(admin_get(srv, "/healthz").status, 200, "healthz while serving")
        got = {}
        started = threading.Event()

        def slow():
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall(b"GET /misc/big.ts HTTP/1.1\r\nHost: x\r\n\r\n")
            buf = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
                started.set()
                time.sleep(0.002)
            started.set()
            got["body"] = buf.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in buf else b""
            s.close()

        t = threading.Thread(target=slow)
        t.start()
        expect(started.wait(10), "response under way")  # SIGTERM only once the response is
        srv.signal(signal.SIGTERM)
        r = wait_for(lambda: (lambda r: r if r.status == 503 else None)(admin_get(srv, "/healthz")),
                     what="/healthz 503")
        expect_eq(r.body, b"draining\n")
        expect(stats(srv)["draining"], "/stats says draining")
        t.join(30)
        expect_eq(sha256(got.get("body", b"")), sha256(big), "in-flight response completed")
        expect_eq(srv.proc.wait(15), 0, "exit status")


def _stuck_reader(port):
    """A connection whose response (16 MB) stays under way: it reads one
    buffer and then nothing, so only the drain timeout ends it."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /misc/big.ts HTTP/1.1\r\nHost: x\r\n\r\n")
    s.settimeout(10)
    expect(s.recv(4096).startswith(b"HTTP/1.1 200"), "response under way")
    return s


def test_sigterm_after_reload_takes_the_shorter_drain():
    """timeouts.drain 60s, a reload sets it to 1s, SIGTERM right after: the
    process must be gone within about 1 s of it, also with a response stuck
    on the generation the reload retired (before: that generation kept the
    deadline it was given at 60 s, and so did a live reload's SIGTERM on
    a busy connection) and on the live generation."""
    for needs_workers in (False, True):
        with Server(ROOT, admin=True, extra="timeouts:\n  drain: 60s\n  send: 120s\n") as srv:
            stuck = [_stuck_reader(srv.port)]
            extra = "timeouts:\n  drain: 1s\n  send: 120s\n"
            if needs_workers:  # a key that takes a new generation of workers
                extra += "fd_cache:\n  entries: 2048\n"
            write_conf(srv, extra=extra)
            reload_and_wait(srv, 2)
            stuck.append(_stuck_reader(srv.port))  # on the new generation, if any
            t0 = time.time()
            srv.signal(signal.SIGTERM)
            try:
                rc = srv.proc.wait(20)
            except Exception:
                rc = None
            took = time.time() - t0
            for s in stuck:
                s.close()
            expect_eq(rc, 0, "exit status (new workers: %s)" % needs_workers)
            expect(took < 5, "exited %.1f s after SIGTERM with drain 1s (new workers: %s)" %
                   (took, needs_workers))


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
