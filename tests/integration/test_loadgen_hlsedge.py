#!/usr/bin/env python3
"""hlsedge-loadgen against the real hlsedge: what loadgen counts (requests,
responses by status class, bytes received, segments and playlists) must
match what the server counted.

The server's side comes from GET /stats on the admin listener (JSON:
requests.total, responses.<class>, bytes_out, kinds.*) and, where the
server writes one, from its access log (log.access, access_format json:
status and body bytes per request). Each source that is there is checked;
with neither the test exits 77 (skip).

Runs, each bounded by --requests:
  * HLS mode, line rate, viewers over the 5 renditions of a generated library
  * URL-list mode over segments, a playlist and one missing file (404s)
  * HLS mode over HTTPS (loadgen -k), when the server has a TLS listener

Env: HE_LOADGEN (the loadgen binary; skip when missing), HE_BIN (hlsedge),
HE_SRC; HE_TLS=1 runs every server over HTTPS (he.py)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import he  # noqa: E402
from he import Conn, Server, expect, expect_eq, make_library, run_tests  # noqa: E402

LOADGEN = os.environ.get("HE_LOADGEN") or os.path.join(he.SRC, "build", "hlsedge-loadgen")
TMP = tempfile.mkdtemp(prefix="he-lg-srv-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
# A loadgen response carries at most this many header bytes (status line and
# the server's headers); the byte check allows this much per request.
HEAD_MAX = 1024
CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")


# ---------------------------------------------------------------- server side

def admin_get(srv, path):
    c = Conn(srv.admin_port, tls=False)
    try:
        return c.request("GET", path)
    finally:
        c.close()


def stats(srv):
    """/stats as a dict, or None when the server has no such route."""
    if not srv.admin_port:
        return None
    try:
        r = admin_get(srv, "/stats")
    except OSError:
        return None
    if r.status != 200:
        return None
    try:
        return json.loads(r.body)
    except ValueError:
        return None


def stats_counts(s):
    """The figures this test compares, from a /stats snapshot."""
    resp = s.get("responses", {})
    kinds = s.get("kinds", {})
    return {
        "requests": s["requests"]["total"],
        "classes": {k: resp.get(k, 0) for k in CLASSES},
        "bytes": s["bytes_out"],
        "segments": kinds.get("segment"),
        "playlists": (kinds["master"] + kinds["media"]) if "master" in kinds and "media" in kinds else None,
        "active": s.get("connections", {}).get("active", 0),
    }


def delta(after, before):
    d = {
        "requests": after["requests"] - before["requests"],
        "classes": {k: after["classes"][k] - before["classes"][k] for k in CLASSES},
        "bytes": after["bytes"] - before["bytes"],
    }
    for k in ("segments", "playlists"):
        d[k] = None if after[k] is None or before[k] is None else after[k] - before[k]
    return d


class AccessLog:
    """Reads the JSON access log lines written since the last call."""

    def __init__(self, path):
        self.path, self.pos = path, 0

    def read_new(self, expect_lines, timeout=10.0):
        deadline = time.time() + timeout
        lines = []
        while True:
            data = b""
            if os.path.exists(self.path):
                with open(self.path, "rb") as f:
                    f.seek(self.pos)
                    data = f.read()
            # only whole lines
            cut = data.rfind(b"\n") + 1
            got = [ln for ln in data[:cut].decode("utf-8", "replace").splitlines() if ln.strip()]
            if len(got) >= expect_lines or time.time() > deadline:
                self.pos += cut
                lines = got
                break
            time.sleep(0.05)
        recs = [json.loads(ln) for ln in lines]
        classes = {k: 0 for k in CLASSES}
        for r in recs:
            classes["%dxx" % (r["status"] // 100)] += 1
        segs = sum(1 for r in recs if r["target"].split("?")[0].endswith(".ts"))
        pls = sum(1 for r in recs if r["target"].split("?")[0].endswith(".m3u8"))
        # the log counts bodies; loadgen's header bytes are checked against /stats
        return {"requests": len(recs), "classes": classes, "bytes": None,
                "body_bytes": sum(r["bytes"] for r in recs), "segments": segs, "playlists": pls}


# ---------------------------------------------------------------- loadgen side

def loadgen(args, timeout=120):
    p = subprocess.run([LOADGEN, "--json", "-q"] + args, capture_output=True, text=True, timeout=timeout)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        raise AssertionError("loadgen rc %d printed no JSON:\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
    return p.returncode, j, p.stderr


def lg_counts(j):
    classes = {k: 0 for k in CLASSES}
    for code, n in j["status"].items():
        c = "%dxx" % (int(code) // 100)
        if c in classes:
            classes[c] += n
    return {"requests": j["requests"], "classes": classes, "bytes": j["bytes"],
            "body_bytes": j["body_bytes"], "segments": j.get("segments"), "playlists": j.get("playlists"),
            "connects": j.get("connects")}


# ---------------------------------------------------------------- checks

class Harness:
    """One server with /stats (admin listener) and a JSON access log, each
    used when the server has it."""

    def __init__(self, tls=None):
        self.alog = os.path.join(TMP, "access-%d.log" % time.monotonic_ns())
        extra = 'log:\n  access: "%s"\n  access_format: json\n' % self.alog
        self.srv = None
        self.have_log = True
        for attempt in ((True, extra), (True, ""), (False, extra), (False, "")):
            admin, ex = attempt
            srv = Server(ROOT, workers=2, admin=admin, extra=ex, tls=tls)
            try:
                srv.start()
            except RuntimeError as e:  # config rejected: a key this server lacks
                if getattr(srv, "log", None):
                    srv.log.close()
                shutil.rmtree(srv.dir, ignore_errors=True)
                last = e
                continue
            self.srv, self.have_log = srv, bool(ex)
            break
        if self.srv is None:
            raise AssertionError("hlsedge did not start with any config:\n%s" % last)
        self.log = AccessLog(self.alog) if self.have_log else None
        # The admin listener may come up a moment after the data listener.
        self.have_stats = False
        deadline = time.time() + (5 if self.srv.admin_port else 0)
        while True:
            if stats(self.srv) is not None:
                self.have_stats = True
                break
            if time.time() > deadline:
                break
            time.sleep(0.05)
        if self.have_log:
            # the log file exists once the server opened it
            deadline = time.time() + 5
            while not os.path.exists(self.alog) and time.time() < deadline:
                time.sleep(0.05)
            self.have_log = os.path.exists(self.alog)
            if not self.have_log:
                self.log = None

    def sources(self):
        out = []
        if self.have_stats:
            out.append("/stats")
        if self.have_log:
            out.append("access log")
        return out

    def base(self):
        return "%s://127.0.0.1:%d" % ("https" if self.srv.tls else "http", self.srv.port)

    def settle_stats(self, before, n, timeout=10.0):
        """Waits until the server counted n more requests and no connection is
        open; returns the delta."""
        deadline = time.time() + timeout
        while True:
            now = stats_counts(stats(self.srv))
            d = delta(now, before)
            if (d["requests"] >= n and now["active"] == 0) or time.time() > deadline:
                return d
            time.sleep(0.05)

    def idle_stats(self):
        deadline = time.time() + 10
        while True:
            s = stats_counts(stats(self.srv))
            if s["active"] == 0 or time.time() > deadline:
                return s
            time.sleep(0.05)

    def run(self, args, what, want_rc=(0,), hls=True):
        """Runs loadgen and checks its counts against every server source."""
        before = self.idle_stats() if self.have_stats else None
        if self.log:
            self.log.read_new(0, timeout=0)  # skip lines of earlier requests (probes)
        rc, j, err = loadgen(args)
        expect(rc in want_rc, "%s: loadgen exit %d (want %s): %s" % (what, rc, want_rc, err.strip()[-300:]))
        lg = lg_counts(j)
        expect(lg["requests"] > 0, "%s: loadgen made no requests" % what)
        expect_eq(j.get("aborted", 0), 0, "%s: requests aborted at the end" % what)
        checked = []
        if self.have_stats:
            d = self.settle_stats(before, lg["requests"])
            compare(what + " vs /stats", lg, d, hls, tls=self.srv.tls)
            checked.append("/stats")
        if self.log:
            d = self.log.read_new(lg["requests"])
            compare(what + " vs access log", lg, d, hls, tls=self.srv.tls)
            expect_eq(d["body_bytes"], lg["body_bytes"], what + " vs access log: body bytes")
            checked.append("access log")
        print("  %s: %d requests, %s, %d bytes; matched %s" % (
            what, lg["requests"], {k: v for k, v in lg["classes"].items() if v}, lg["bytes"],
            " and ".join(checked)), flush=True)
        return j

    def stop(self):
        self.srv.stop()


def compare(what, lg, srv, hls, tls=False):
    expect_eq(srv["requests"], lg["requests"], what + ": requests")
    for k in CLASSES:
        expect_eq(srv["classes"][k], lg["classes"][k], what + ": responses " + k)
    # The access log has bodies only ("bytes": None); the caller checks them.
    if srv["bytes"] is not None:
        # Bytes: the server counts the HTTP bytes it wrote (headers and
        # bodies). Allow for header accounting differences only: loadgen's
        # bodies are a floor, the bodies plus HEAD_MAX per request a ceiling.
        expect(lg["body_bytes"] <= srv["bytes"] <= lg["body_bytes"] + HEAD_MAX * lg["requests"],
               "%s: server bytes %d outside [bodies %d, bodies + %d per request]"
               % (what, srv["bytes"], lg["body_bytes"], HEAD_MAX))
        if tls:
            # Over HTTPS loadgen's "bytes" are what came off the socket: TLS
            # records (at most 16 KiB of data each, some 22-29 bytes of header
            # and tag) plus the handshakes. Allow 64 bytes a record (a response
            # may start a record of its own) and 16 KiB of handshake a connection.
            records = srv["bytes"] // 16384 + 2 * lg["requests"]
            slack = 64 * records + 16384 * max(1, lg.get("connects") or 1)
            expect(srv["bytes"] <= lg["bytes"] <= srv["bytes"] + slack,
                   "%s: TLS bytes read %d outside [server's HTTP bytes %d, + %d of TLS overhead]"
                   % (what, lg["bytes"], srv["bytes"], slack))
            print("  note: %s: TLS overhead %d bytes (%.3f%%)"
                  % (what, lg["bytes"] - srv["bytes"], 100.0 * (lg["bytes"] - srv["bytes"]) / max(1, srv["bytes"])))
        else:
            expect(abs(srv["bytes"] - lg["bytes"]) <= HEAD_MAX * lg["requests"],
                   "%s: server bytes %d vs loadgen %d" % (what, srv["bytes"], lg["bytes"]))
            if srv["bytes"] != lg["bytes"]:
                print("  note: %s: bytes differ by %d (within the header allowance)" % (what, srv["bytes"] - lg["bytes"]))
    if hls:
        if srv.get("segments") is not None and lg.get("segments") is not None:
            expect_eq(srv["segments"], lg["segments"], what + ": segments")
        if srv.get("playlists") is not None and lg.get("playlists") is not None:
            expect_eq(srv["playlists"], lg["playlists"], what + ": playlists")


_H = {}


def harness(tls=None):
    key = he.TLS if tls is None else tls
    if key not in _H:
        _H[key] = Harness(tls=tls)
    return _H[key]


def need_sources(h):
    if not h.sources():
        print("SKIP: the server has neither /stats nor an access log to compare with")
        sys.exit(77)


# ---------------------------------------------------------------- tests

def test_hls_linerate_counts_match():
    h = harness()
    need_sources(h)
    j = h.run(["--viewers", "5", "--pace", "linerate", "-n", "150", "--rendition", "mix:1,1,1,1,1",
               h.base() + "/master.m3u8"] + (["-k"] if h.srv.tls else []), "hls linerate")
    expect_eq(j["mode"], "hls", "mode")
    expect_eq(j["requests"], 150, "bounded by --requests")
    expect_eq(j["errors"], 0, "errors")
    expect(j["segments"] > 0 and j["playlists"] >= 5 * 2, "master and media playlists, then segments")
    expect(len([r for r in j["renditions"] if r["segments"]]) >= 2, "more than one rendition fetched")


def test_hls_abr_counts_match():
    h = harness()
    need_sources(h)
    j = h.run(["--viewers", "3", "--pace", "linerate", "-n", "60", "--rendition", "abr",
               h.base() + "/master.m3u8"] + (["-k"] if h.srv.tls else []), "hls abr")
    expect_eq(j["requests"], 60, "bounded by --requests")


def test_urls_mode_counts_match_with_404s():
    h = harness()
    need_sources(h)
    base = h.base()
    urls = ["%s/%s/seg_%05d.ts" % (base, r, n) for r in he.RENDITIONS for n in (0, 1)]
    urls += [base + "/288p/index.m3u8", base + "/misc/aes.key", base + "/no/such/file.ts"]
    f = os.path.join(TMP, "urls.txt")
    with open(f, "w") as fh:
        fh.write("\n".join(urls) + "\n")
    # the 404s make loadgen exit 1 (errors happened)
    j = h.run(["--mode", "urls", "-c", "4", "-n", "200", "--url-file", f] + (["-k"] if h.srv.tls else []),
              "urls", want_rc=(1,), hls=False)
    expect_eq(j["mode"], "urls", "mode")
    expect_eq(j["requests"], 200, "bounded by --requests")
    expect(j["status"].get("404", 0) > 0, "some 404s were asked for")
    expect_eq(j["error_kinds"].get("http_status", 0), j["status"].get("404", 0), "404s counted as http_status errors")
    expect_eq(j["connects"], 4, "keep-alive: one connection each (404s do not close)")


def test_urls_mode_all_ok():
    h = harness()
    need_sources(h)
    base = h.base()
    j = h.run(["--mode", "urls", "-c", "2", "-n", "50", base + "/1080p/seg_00000.ts", base + "/master.m3u8"]
              + (["-k"] if h.srv.tls else []), "urls ok", hls=False)
    expect_eq(j["errors"], 0, "errors")


def test_https_hls_counts_match():
    if he.TLS:
        print("  (HE_TLS=1: the tests above already ran over HTTPS)")
        return
    if not shutil.which("openssl"):
        print("  SKIP part: openssl CLI missing, no certificates for the TLS listener")
        return
    try:
        h = harness(tls=True)
    except AssertionError as e:
        if "tls" in str(e).lower():
            print("  SKIP part: the server has no TLS listener here: %s" % str(e).splitlines()[0])
            return
        raise
    need_sources(h)
    j = h.run(["-k", "--viewers", "4", "--pace", "linerate", "-n", "80", "--rendition", "mix:1,1,1,1,1",
               h.base() + "/master.m3u8"], "https hls")
    expect_eq(j["errors"], 0, "errors")


def main():
    if not LOADGEN or not os.access(LOADGEN, os.X_OK):
        print("SKIP: HE_LOADGEN (%s) is not an executable loadgen" % LOADGEN)
        return 77
    if not os.access(he.BIN, os.X_OK):
        print("SKIP: HE_BIN (%s) is not an executable hlsedge" % he.BIN)
        return 77
    rc = 1
    try:
        h = harness()
        if not h.sources():
            print("SKIP: the server has neither /stats (admin listener) nor an access log to compare with")
            rc = 77
        else:
            print("comparing with: %s" % ", ".join(h.sources()), flush=True)
            rc = run_tests(globals())
    finally:
        for h in list(_H.values()):
            try:
                h.stop()
            except AssertionError as e:
                print("FAIL server stop: %s" % e)
                rc = 1
        shutil.rmtree(TMP, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
