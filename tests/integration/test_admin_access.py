"""Who may use the admin listener and purge, through the real binary:

  - admin.allow (default loopback): a client outside it gets 403 on every
    route and the connection closes; counted in
    hlsedge_admin_refused_total{reason="address"}; a reload changes it live;
  - admin.token_file: POST /purge needs "Authorization: Bearer <token>"
    (none, a wrong one: 401 with WWW-Authenticate, counted with
    reason="token"), read-only routes do not;
  - PURGE on the viewer port: loopback clients as before; others need the
    token (401 without it, 405 when no token is configured), counted in
    hlsedge_purge_refused_total.

A client "outside" is one bound to 127.0.0.2 (for admin.allow) or to the
host's first non-loopback address (for PURGE; skipped without one).
Every wait is bounded."""

import os
import json
import signal
import socket
import subprocess
import sys
import time
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import he  # noqa: E402
from he import Server, blob, expect, expect_eq, run_main  # noqa: E402
from he_admin import metric_sum, metrics_text, parse_metrics, reload_and_wait, stats  # noqa: E402
from origin import Origin  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-admin-access-")
ROOT = os.path.join(TMP, "lib")
os.makedirs(ROOT, exist_ok=True)
TOKEN = "t0ken-for-the-tests-0123456789abcdef"


def raw(port, req, src=None, host="127.0.0.1", timeout=5):
    """Sends req from source address src; (status, headers text, body)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    s.connect((host, port))
    s.sendall(req)
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
            head, sep, body = got.partition(b"\r\n\r\n")
            if sep:
                n = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                     if line.lower().startswith(b"content-length:")]
                if n and len(body) >= n[0]:
                    break
    finally:
        s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else None
    return status, head.decode("latin-1"), body


def req(method, path, token=None, body=b""):
    h = "%s %s HTTP/1.1\r\nHost: a\r\nConnection: close\r\n" % (method, path)
    if token is not None:
        h += "Authorization: Bearer %s\r\n" % token
    if body:
        h += "Content-Length: %d\r\n" % len(body)
    return h.encode() + b"\r\n" + body


def host_address():
    """The host's first non-loopback IPv4 address, or None."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                             timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "inet" and not f[3].startswith("127."):
            return f[3].split("/")[0]
    return None


def refused(srv):
    m = parse_metrics(metrics_text(srv))
    return (metric_sum(m, "hlsedge_admin_refused_total", reason="address"),
            metric_sum(m, "hlsedge_admin_refused_total", reason="token"),
            metric_sum(m, "hlsedge_purge_refused_total"))


def test_admin_allow():
    with Server(ROOT, admin=True) as srv:  # default: loopback
        st, _, _ = raw(srv.admin_port, req("GET", "/stats"), src="127.0.0.2")
        expect_eq(st, 200, "127.0.0.2 is loopback")
        with open(srv.conf) as f:
            text = f.read()
        with open(srv.conf, "w") as f:
            f.write(text.replace("admin:\n", 'admin:\n  allow: ["127.0.0.2", "10.0.0.0/8"]\n'))
        srv.signal(signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline:  # asked from the one address still allowed
            st, _, body = raw(srv.admin_port, req("GET", "/stats"), src="127.0.0.2")
            if st == 200 and json.loads(body)["config"]["generation"] == 2:
                break
            time.sleep(0.05)
        expect_eq(st, 200, "reloaded")
        st, head, body = raw(srv.admin_port, req("GET", "/metrics"))
        expect_eq(st, 403, "127.0.0.1 is no longer allowed")
        expect(b"admin.allow" in body, body)
        expect("connection: close" in head.lower(), head)
        st, _, _ = raw(srv.admin_port, req("POST", "/purge?path=/x.ts"))
        expect_eq(st, 403, "purge from outside admin.allow")
        st, _, _ = raw(srv.admin_port, req("GET", "/stats"), src="127.0.0.2")
        expect_eq(st, 200, "127.0.0.2 is")
        st, _, body = raw(srv.admin_port, req("GET", "/metrics"), src="127.0.0.2")
        m = parse_metrics(body.decode())
        expect_eq(metric_sum(m, "hlsedge_admin_refused_total", reason="address"), 2, "refusals counted")


def test_token_guards_purge():
    tok = os.path.join(TMP, "token")
    with open(tok, "w") as f:
        f.write(TOKEN + "\n")
    files = {"/t/a.ts": blob(3000, 1), "/t/b.ts": blob(3000, 2)}
    with Origin(files=files) as o:
        extra = 'origin:\n  urls: ["%s"]\ncache:\n  ram_size: 16m\n  prefetch: 0\n' % o.url
        srv = Server(ROOT, admin=True, extra=extra)
        with open(srv.conf) as f:
            text = f.read()
        with open(srv.conf, "w") as f:
            f.write(text.replace('admin:\n', 'admin:\n  token_file: "%s"\n' % tok))
        with srv:
            for p in files:
                expect_eq(srv.get(p).status, 200, p)
            st, head, _ = raw(srv.admin_port, req("POST", "/purge?path=/t/a.ts"))
            expect_eq(st, 401, "no token")
            expect("www-authenticate: bearer" in head.lower(), head)
            st, _, _ = raw(srv.admin_port, req("POST", "/purge?path=/t/a.ts", token="nope" * 5))
            expect_eq(st, 401, "a wrong token")
            st, _, _ = raw(srv.admin_port, req("POST", "/purge?path=/t/a.ts", token=TOKEN[:-1]))
            expect_eq(st, 401, "a token one byte short")
            st, _, body = raw(srv.admin_port, req("POST", "/purge?path=/t/a.ts", token=TOKEN))
            expect_eq((st, body), (200, b"purged\n"), "the token")
            st, _, _ = raw(srv.admin_port, req("GET", "/stats"))
            expect_eq(st, 200, "read-only routes take no token")
            # PURGE on the viewer port from loopback: as before, no token needed
            st, _, _ = raw(srv.port, req("PURGE", "/t/b.ts"))
            expect_eq(st, 200, "PURGE from loopback")
            a, t, p = refused(srv)
            expect_eq((a, t, p), (0, 3, 0), "refusals (address, token, purge)")
            expect_eq(stats(srv)["admin"]["refused"]["token"], 3, "/stats admin.refused.token")


def test_viewer_purge_from_another_address():
    addr = host_address()
    if not addr:
        print("no non-loopback address: skipped")
        return
    tok = os.path.join(TMP, "token2")
    with open(tok, "w") as f:
        f.write(TOKEN)
    files = {"/v/a.ts": blob(3000, 3)}
    with Origin(files=files) as o:
        extra = 'origin:\n  urls: ["%s"]\ncache:\n  ram_size: 16m\n  prefetch: 0\n' % o.url
        srv = Server(ROOT, admin=True, extra=extra, listen=["0.0.0.0:%d" % he.free_port()])
        srv.port = int(srv.listen[0].rsplit(":", 1)[1])
        with srv:
            expect_eq(srv.get("/v/a.ts").status, 200, "cached")
            # no token configured: others get 405, as before
            st, _, _ = raw(srv.port, req("PURGE", "/v/a.ts"), host=addr)
            expect_eq(st, 405, "PURGE from %s without a token configured" % addr)
            with open(srv.conf) as f:
                text = f.read()
            with open(srv.conf, "w") as f:
                f.write(text.replace('admin:\n', 'admin:\n  token_file: "%s"\n' % tok))
            reload_and_wait(srv, 2)
            st, head, _ = raw(srv.port, req("PURGE", "/v/a.ts"), host=addr)
            expect_eq(st, 401, "PURGE from %s without the token" % addr)
            expect("www-authenticate: bearer" in head.lower(), head)
            st, _, _ = raw(srv.port, req("PURGE", "/v/a.ts", token="x" * 20), host=addr)
            expect_eq(st, 401, "a wrong token")
            st, _, _ = raw(srv.port, req("PURGE", "/v/a.ts", token=TOKEN), host=addr)
            expect_eq(st, 200, "PURGE with the token")
            expect_eq(refused(srv)[2], 3, "viewer PURGE refusals counted")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, sys.argv[1:]))
