"""The access log through the real binary: combined and JSON lines with
every field, one record per response and none dropped, SIGUSR1 reopening
both logs after logrotate renamed them, and the log turned on by a
reload."""

import datetime
import json
import os
import re
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-alog-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)

COMBINED = re.compile(
    r'^(?P<client>\S+) - - \[(?P<time>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000)\] '
    r'"(?P<method>\S+) (?P<target>\S+) (?P<proto>HTTP/1\.[01])" (?P<status>\d{3}) (?P<bytes>\d+) "-" "-" '
    r'rt=(?P<rt>\d+\.\d{6}) ttfb=(?P<ttfb>\d+\.\d{6}) worker=(?P<worker>\d+) cache=(?P<cache>\S+) '
    r'tls=(?P<tls>\S+)$')


def lines(path, n, timeout=5):
    """The first n lines of path, waiting for the control thread to write them."""
    got = []

    def ready():
        if not os.path.exists(path):
            return None
        with open(path) as f:
            got[:] = f.read().splitlines()
        return got if len(got) >= n else None
    try:
        return wait_for(ready, timeout, "%d lines in %s" % (n, path))[:n]
    except AssertionError as e:
        raise AssertionError("%s: %d lines there: %r" % (e, len(got), got[:3]))


def size(path):
    return os.path.getsize(os.path.join(ROOT, path.lstrip("/")))


def test_combined_fields():
    log = os.path.join(TMP, "access-combined.log")
    with Server(ROOT, admin=True, extra="log:\n  access: %s\n" % log) as srv:
        c = srv.conn()
        expect_eq(c.request("GET", "/master.m3u8").status, 200)
        expect_eq(c.request("HEAD", "/360p/seg_00000.ts").status, 200)
        expect_eq(c.request("GET", "/missing.ts").status, 404)
        expect_eq(c.request("GET", "/288p/seg_00001.ts?token=abc", version="1.0").status, 200)
        c.close()
        ls = lines(log, 4)
        ms = [COMBINED.match(l) for l in ls]
        expect(all(ms), "combined format:\n" + "\n".join(ls))
        want = [("GET", "/master.m3u8", "HTTP/1.1", 200, size("/master.m3u8")),
                ("HEAD", "/360p/seg_00000.ts", "HTTP/1.1", 200, 0),
                ("GET", "/missing.ts", "HTTP/1.1", 404, len(b"404 Not Found\n")),
                ("GET", "/288p/seg_00001.ts?token=abc", "HTTP/1.0", 200, size("/288p/seg_00001.ts"))]
        for m, (method, target, proto, status, body) in zip(ms, want):
            expect_eq((m["method"], m["target"], m["proto"], int(m["status"]), int(m["bytes"])),
                      (method, target, proto, status, body), "line")
            expect_eq(m["client"], "127.0.0.1", "client")
            expect_eq((m["worker"], m["cache"], m["tls"]), ("0", "-", "-"), "worker, cache, tls")
            expect(float(m["ttfb"]) <= float(m["rt"]) < 5, "ttfb <= duration")
            t = datetime.datetime.strptime(m["time"], "%d/%b/%Y:%H:%M:%S %z").timestamp()
            expect(abs(t - time.time()) < 60, "time is now")
        s = stats(srv)
        expect_eq(s["access_log"]["enabled"], True)
        expect_eq(s["access_log"]["path"], log)


def test_json_fields_and_no_drops():
    log = os.path.join(TMP, "access.json")
    with Server(ROOT, workers=2, admin=True,
                extra="log:\n  access: %s\n  access_format: json\n" % log) as srv:
        n = 0
        for _ in range(10):
            c = srv.conn()
            for _ in range(100):
                expect_eq(c.request("GET", "/720p/index.m3u8").status, 200)
                n += 1
            c.close()
        expect_eq(srv.get("/nope.ts").status, 404)
        n += 1
        recs = [json.loads(l) for l in lines(log, n)]
        expect_eq(len(recs), n, "one record per response")
        r = recs[0]
        fields = (("time", str), ("client", str), ("method", str), ("target", str), ("protocol", str),
                  ("status", int), ("bytes", int), ("duration_us", int), ("ttfb_us", int), ("worker", int),
                  ("cache", str), ("tls", str))
        expect_eq(list(r), [k for k, _ in fields], "the fields, in order")
        for k, t in fields:
            expect(isinstance(r.get(k), t), "field %s: %r" % (k, r.get(k)))
        expect_eq((r["method"], r["target"], r["protocol"], r["status"], r["bytes"]),
                  ("GET", "/720p/index.m3u8", "HTTP/1.1", 200, size("/720p/index.m3u8")))
        expect(r["time"].endswith("Z"), "UTC time")
        expect_eq({x["worker"] for x in recs} <= {0, 1}, True, "worker ids")
        expect_eq([(x["status"], x["target"]) for x in recs if x["status"] != 200], [(404, "/nope.ts")], "the 404")
        # the workers' rings are merged by time
        times = [x["time"] for x in recs]
        expect(times == sorted(times), "records in time order")
        s = wait_for(lambda: (lambda s: s if s["access_log"]["written"] >= n else None)(stats(srv)),
                     what="records written")
        expect_eq(s["access_log"]["written"], n, "written")
        expect_eq(s["access_log"]["dropped"], 0, "dropped")


def test_refused_requests_name_what_was_read():
    """A request refused before its headers were whole is logged with the
    method and version it sent; one refused before its version (414) says
    "-" for the version."""
    log = os.path.join(TMP, "access-refused.json")
    with Server(ROOT, extra="log:\n  access: %s\n  access_format: json\n" % log) as srv:
        for req, status in ((b"HEAD /master.m3u8 HTTP/1.0\r\nX-Big: " + b"v" * 9000 + b"\r\n\r\n", 431),
                            (b"GET /x HTTP/1.1\r\nBad Header: 1\r\n\r\n", 400),
                            (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414)):
            c = srv.conn()
            c.send(req)
            expect_eq(c.read_response(head_only=req.startswith(b"HEAD")).status, status)
            c.close()
        recs = [json.loads(l) for l in lines(log, 3)]
        expect_eq([(r["method"], r["protocol"], r["status"]) for r in recs],
                  [("HEAD", "HTTP/1.0", 431), ("GET", "HTTP/1.1", 400), ("GET", "-", 414)])


def test_sigusr1_reopens_both_logs():
    alog = os.path.join(TMP, "rot-access.log")
    elog = os.path.join(TMP, "rot-error.log")
    with Server(ROOT, admin=True, extra="log:\n  access: %s\n  file: %s\n" % (alog, elog)) as srv:
        expect_eq(srv.get("/master.m3u8").status, 200)
        lines(alog, 1)
        expect("listening on" in open(elog).read(), "error log file in use")
        os.rename(alog, alog + ".1")
        os.rename(elog, elog + ".1")
        # records until the signal still go to the renamed file. The worker
        # records a response when it reaps the send's completion, which can
        # come after the client has read the response: wait for the line
        # before signalling, or it may rightly land in the new file.
        expect_eq(srv.get("/360p/index.m3u8").status, 200)
        lines(alog + ".1", 2)
        srv.signal(signal.SIGUSR1)
        wait_for(lambda: os.path.exists(alog) and os.path.exists(elog), what="new log files")
        expect_eq(srv.get("/576p/index.m3u8").status, 200)
        new = lines(alog, 1)
        expect("/576p/index.m3u8" in new[0], "new record in the new file")
        old = lines(alog + ".1", 2)
        expect("/master.m3u8" in old[0] and "/360p/index.m3u8" in old[1], "old records in the old file")
        expect("log files reopened" in open(elog).read(), "error log reopened")
        expect("log files reopened" not in open(elog + ".1").read(), "not in the old error log")


def test_reload_turns_access_log_on():
    log = os.path.join(TMP, "later.log")
    with Server(ROOT, admin=True) as srv:
        expect_eq(srv.get("/master.m3u8").status, 200)
        expect_eq(stats(srv)["access_log"]["enabled"], False)
        with open(srv.conf, "a") as f:
            f.write("log:\n  access: %s\n  access_format: json\n" % log)
        srv.signal(signal.SIGHUP)
        wait_for(lambda: stats(srv)["access_log"]["enabled"], what="access log on")
        expect_eq(stats(srv)["config"]["server_generations"], 1, "same workers")
        expect_eq(srv.get("/360p/index.m3u8").status, 200)
        rec = json.loads(lines(log, 1)[0])
        expect_eq(rec["target"], "/360p/index.m3u8")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
