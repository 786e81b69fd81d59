"""Signed URLs through the real binary (issue 15): EdgeAuth and secure_link
tokens made by an independent issuer (he_token.py), every way a token can be
wrong, key rotation by SIGHUP on an open connection, the token carried from
a master through media playlists to segments and parts (VOD and LL), two
viewers with different tokens behind one origin request, and no token in
the origin's targets or the access log."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from he import BIN, Server, connect, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import metrics_text, parse_metrics, metric_sum, reload_and_wait, stats, wait_for  # noqa: E402
from he_token import edgeauth, secure_link  # noqa: E402
from origin import Origin  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-auth-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
K1 = "6b2c1f0e9d8a7b6c5d4e3f2a1b0c9d8e"
K2 = "9f01aa55"
K3 = "00112233445566778899aabbccddeeff"

# _HLS_msn=0: segment 0 is complete, so the blocking reload is answered at
# once (rfc8216bis 6.2.5.2); msn 1 would be held until the file has it.
LL_MASTER = """#EXTM3U
#EXT-X-VERSION:9
#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="en",DEFAULT=YES,URI="audio/index.m3u8"
#EXT-X-STREAM-INF:BANDWIDTH=800000,AUDIO="aud"
v/index.m3u8?_HLS_msn=0
"""
LL_MEDIA = """#EXTM3U
#EXT-X-VERSION:9
#EXT-X-TARGETDURATION:4
#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=3.0
#EXT-X-PART-INF:PART-TARGET=1.0
#EXT-X-MEDIA-SEQUENCE:0
#EXT-X-MAP:URI="init.mp4"
#EXT-X-KEY:METHOD=AES-128,URI="key.bin"
#EXTINF:4.0,
seg0.m4s
#EXT-X-PART:DURATION=1.0,URI="seg1.0.m4s",INDEPENDENT=YES
#EXT-X-PRELOAD-HINT:TYPE=PART,URI="seg1.1.m4s"
#EXT-X-RENDITION-REPORT:URI="../audio/index.m3u8",LAST-MSN=1,LAST-PART=0
"""


def write(rel, data):
    p = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


write("ll/master.m3u8", LL_MASTER)
write("ll/v/index.m3u8", LL_MEDIA)
write("ll/audio/index.m3u8", LL_MEDIA)
for n in ("init.mp4", "key.bin", "seg0.m4s", "seg1.0.m4s", "seg1.1.m4s"):
    write("ll/v/" + n, b"x" * 100)
    write("ll/audio/" + n, b"a" * 100)
write("s/link.ts", b"secure " * 10)


def rule_yaml(keys, prefix="/", extra=""):
    return ('auth:\n  - prefix: %s\n    scheme: edgeauth\n    keys: [%s]\n    clock_skew: 30s\n%s'
            % (prefix, ", ".join('"%s"' % k for k in keys), extra))


SECURE_LINK = ('  - prefix: /s/\n    scheme: secure_link\n    keys: ["736563726574"]\n'
               '    template: "$expires$uri$remote_addr $secret"\n')


def q(tok):
    return "__token__=" + urllib.parse.quote(tok, safe="")


def token(key=K1, acl="/*", **kw):
    kw.setdefault("exp", int(time.time()) + 300)
    return edgeauth(key, acl=acl, **kw)


def uris(body):
    """Every URI of a playlist: URI lines and URI="..." attributes."""
    out = []
    for line in body.decode().splitlines():
        line = line.strip()
        if not line:
            continue
        if not line.startswith("#"):
            out.append(line)
        out += re.findall(r'URI="([^"]*)"', line) if line.startswith("#EXT") else []
    return out


def test_every_wrong_token():
    now = int(time.time())
    with Server(ROOT, admin=True, extra=rule_yaml([K1])) as srv:
        c = srv.conn()
        ok = c.request("GET", "/360p/seg_00000.ts?" + q(token()))
        expect_eq(ok.status, 200, "valid token")
        cases = [
            ("missing", "/360p/seg_00000.ts", 403),
            ("expired", "/360p/seg_00000.ts?" + q(token(exp=now - 60)), 410),
            ("not yet valid", "/360p/seg_00000.ts?" + q(token(st=now + 120, exp=now + 600)), 403),
            ("tampered", "/360p/seg_00000.ts?" + q(token().replace("acl=/*", "acl=/3*")), 403),
            ("wrong acl", "/360p/seg_00000.ts?" + q(token(acl="/720p/*")), 403),
            ("wrong ip", "/360p/seg_00000.ts?" + q(token(ip="10.9.8.7")), 403),
            ("wrong key", "/360p/seg_00000.ts?" + q(token(key=K2)), 403),
            ("two tokens", "/360p/seg_00000.ts?%s&%s" % (q(token()), q(token())), 403),
            ("duplicate field", "/360p/seg_00000.ts?" + q("exp=1~" + token()), 403),
            ("garbage", "/360p/seg_00000.ts?__token__=%zz", 403),
        ]
        for what, target, status in cases:
            r = c.request("GET", target)
            expect_eq(r.status, status, what)
            expect_eq(r.body, b"%d %s\n" % (status, b"Forbidden" if status == 403 else b"Gone"),
                      what + ": no detail in the body")
        expect_eq(c.request("GET", "/360p/seg_00000.ts?" + q(token(ip="127.0.0.1"))).status, 200, "right ip")
        expect_eq(c.request("GET", "/360p/seg_00000.ts?" + q(token(exp=now - 20))).status, 200,
                  "expired within clock_skew")
        url_tok = edgeauth(K1, exp=now + 60, url="/360p/seg_00001.ts")
        expect_eq(c.request("GET", "/360p/seg_00001.ts?" + q(url_tok)).status, 200, "url= token")
        expect_eq(c.request("GET", "/360p/seg_00000.ts?" + q(url_tok)).status, 403, "url= token elsewhere")
        c.close()
        a = stats(srv)["auth"]
        for k, v in (("ok", 4), ("missing", 1), ("expired", 1), ("not_yet_valid", 1), ("bad_signature", 3),
                     ("acl", 1), ("ip", 1), ("malformed", 3)):
            expect_eq(a[k], v, "stats auth." + k)
        m = parse_metrics(metrics_text(srv))
        expect_eq(metric_sum(m, "hlsedge_auth_requests_total", result="expired"), 1, "metrics expired")
        expect_eq(metric_sum(m, "hlsedge_auth_requests_total", result="bad_signature"), 3, "metrics bad sig")


def test_cookie_and_secure_link():
    extra = rule_yaml([K1], prefix="/360p/", extra="    cookie: true\n") + SECURE_LINK
    with Server(ROOT, extra=extra) as srv:
        r = srv.get("/360p/seg_00000.ts", headers={"Cookie": "a=b; __token__=%s" % token()})
        expect_eq(r.status, 200, "token from a cookie")
        r = srv.get("/360p/seg_00000.ts", headers={"Cookie": "__token__=%s; __token__=%s" % (token(), token())})
        expect_eq(r.status, 403, "two token cookies")
        expect_eq(srv.get("/288p/seg_00000.ts").status, 200, "outside every rule")
        exp = int(time.time()) + 300
        md5 = secure_link("secret", "/s/link.ts", expires=exp)
        expect_eq(srv.get("/s/link.ts?md5=%s&expires=%d" % (md5, exp)).status, 200, "secure_link")
        expect_eq(srv.get("/s/link.ts?md5=%s&expires=%d" % (md5, exp + 1)).status, 403, "secure_link other exp")
        old = int(time.time()) - 60
        md5 = secure_link("secret", "/s/link.ts", expires=old)
        expect_eq(srv.get("/s/link.ts?md5=%s&expires=%d" % (md5, old)).status, 410, "secure_link expired")
        expect_eq(srv.get("/s/link.ts").status, 403, "secure_link missing")


def follow(srv, c, target, seen, depth=0):
    """GETs target and, for a playlist, every URI in it (relative to it),
    each of which must carry the token; returns the playlists' bodies."""
    r = c.request("GET", target)
    expect_eq(r.status, 200, target)
    expect_eq(int(r.h("content-length")), len(r.body), target + " Content-Length")
    if not target.split("?")[0].endswith(".m3u8"):
        return
    seen.append((target, r))
    base = urllib.parse.urlsplit(target)
    for u in uris(r.body):
        expect("__token__=" in u, "%s: URI %r carries the token" % (target, u))
        expect_eq(u.count("__token__="), 1, "one token in " + u)
        expect(u.count("?") == 1, "one '?' in " + u)
        nxt = urllib.parse.urljoin(base.path, u)
        if nxt not in [s[0] for s in seen] and depth < 3:
            follow(srv, c, nxt, seen, depth + 1)


def test_propagation_vod_and_ll():
    with Server(ROOT, extra=rule_yaml([K1])) as srv:
        c = srv.conn()
        tok = token()
        for master in ("/master.m3u8", "/ll/master.m3u8"):
            seen = []
            follow(srv, c, master + "?" + q(tok), seen)
            expect(len(seen) >= 2, "media playlists reached from " + master)
        seen = []
        follow(srv, c, "/ll/master.m3u8?" + q(tok), seen)
        media = [r for t, r in seen if "/v/index.m3u8" in t][0]
        for want in (b'URI="init.mp4?__token__=', b'URI="key.bin?__token__=', b"seg0.m4s?__token__=",
                     b'URI="seg1.0.m4s?__token__=', b'URI="seg1.1.m4s?__token__=',
                     b'URI="../audio/index.m3u8?__token__='):
            expect(want in media.body, "LL media names %r" % want)
        master = [r for t, r in seen if t.startswith("/ll/master")][0]
        expect(b"v/index.m3u8?_HLS_msn=0&__token__=" in master.body, "own query kept, '&' added")
        # the ETag varies with the token; If-None-Match with it is a 304
        r1 = c.request("GET", "/master.m3u8?" + q(tok))
        r2 = c.request("GET", "/master.m3u8?" + q(token(exp=int(time.time()) + 999)))
        expect(r1.h("etag") != r2.h("etag"), "ETag differs per token")
        r3 = c.request("GET", "/master.m3u8?" + q(tok), headers={"If-None-Match": r1.h("etag")})
        expect_eq(r3.status, 304, "If-None-Match with the token's ETag")
        expect_eq(r3.h("etag"), r1.h("etag"), "304 carries the token's ETag")
        # a Range of a tokenised playlist is answered whole
        r4 = c.request("GET", "/master.m3u8?" + q(tok), headers={"Range": "bytes=0-9"})
        expect_eq(r4.status, 200, "Range on a rewritten playlist")
        expect_eq(r4.body, r1.body, "same body")
        c.close()


def test_rotation_by_sighup():
    with Server(ROOT, admin=True, extra=rule_yaml([K1])) as srv:
        c = srv.conn()
        expect_eq(c.request("GET", "/master.m3u8?" + q(token(K1))).status, 200, "K1 before")
        expect_eq(c.request("GET", "/master.m3u8?" + q(token(K3))).status, 403, "K3 before")
        conf = open(srv.conf).read().replace('keys: ["%s"]' % K1, 'keys: ["%s", "%s"]' % (K3, K1))
        with open(srv.conf, "w") as f:
            f.write(conf)
        reload_and_wait(srv, 2)
        expect_eq(c.request("GET", "/master.m3u8?" + q(token(K3))).status, 200, "K3 after, same connection")
        expect_eq(c.request("GET", "/master.m3u8?" + q(token(K1))).status, 200, "K1 still")
        with open(srv.conf, "w") as f:
            f.write(conf.replace('keys: ["%s", "%s"]' % (K3, K1), 'keys: ["%s"]' % K3))
        reload_and_wait(srv, 3)
        expect_eq(c.request("GET", "/master.m3u8?" + q(token(K1))).status, 403, "K1 retired")
        expect_eq(c.request("GET", "/master.m3u8?" + q(token(K3))).status, 200, "K3")
        c.close()
        expect("live, same workers" in srv.read_log(), "keys rotate without new workers")


def test_cache_one_origin_request_no_token_upstream():
    media = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:6,\nseg1.ts\n#EXT-X-ENDLIST\n"
    files = {"/c/index.m3u8": media.encode(), "/c/seg1.ts": b"s" * 5000}
    log = os.path.join(TMP, "access.log")
    with Origin(files=files) as o:
        extra = ("cache:\n  ram_size: 16m\n  admission: false\norigin:\n  urls: [\"%s\"]\n  retries: 0\n"
                 "log:\n  access: %s\n" % (o.url, log)) + rule_yaml([K1])
        with Server(os.path.join(TMP, "empty"), extra=extra) as srv:
            ta, tb = token(id="viewerA"), token(id="viewerB")
            ra = srv.get("/c/index.m3u8?x=1&" + q(ta))
            rb = srv.get("/c/index.m3u8?" + q(tb) + "&x=1")
            expect_eq((ra.status, rb.status), (200, 200), "both viewers")
            expect(urllib.parse.quote(ta, safe="").encode() in ra.body, "A's playlist has A's token")
            expect(urllib.parse.quote(tb, safe="").encode() in rb.body, "B's playlist has B's token")
            expect(urllib.parse.quote(ta, safe="").encode() not in rb.body, "B's has not A's")
            for t in (ta, tb):
                expect_eq(srv.get("/c/seg1.ts?" + q(t)).status, 200, "segment")
            expect_eq(o.count("/c/index.m3u8"), 1, "one origin request for the playlist")
            expect_eq(o.count("/c/seg1.ts"), 1, "one origin request for the segment")
            for t in o.targets:
                expect("__token__" not in t and "hmac" not in t, "no token reaches the origin: %s" % t)
            expect("/c/index.m3u8?x=1" in o.targets, "other parameters do: %r" % o.targets)
            expect_eq(srv.get("/c/seg1.ts").status, 403, "the cache answers nobody without a token")
        with open(log) as f:
            text = f.read()
        expect("__token__=-" in text, "the access log shows the token's name:\n" + text)
        expect("hmac" not in text and "exp%3D" not in text and "exp=" not in text,
               "no token value in the access log:\n" + text)


BIG = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n" + "".join(
    "#EXTINF:4.0,\nseg_%05d.ts\n" % i for i in range(1000)) + "#EXT-X-ENDLIST\n"
write("big/index.m3u8", BIG)


def pipes(srv):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % srv.proc.pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (srv.proc.pid, fd)).startswith("pipe:")
        except OSError:
            pass
    return n


def kept(srv):
    m = parse_metrics(metrics_text(srv))
    return {r: metric_sum(m, "hlsedge_auth_rewrite_cache_total", result=r) for r in ("hit", "miss", "bypass")}


def test_kept_rewrite_sent_by_reference():
    """A 1,000-segment playlist's rewrite (130 KB) is kept for its token and,
    found again, sent by vmsplice from a sealed copy: byte-identical to the
    first answer for a slow reader (the pipe holds what the socket could not
    take), a reader that leaves mid-body, and connections at once; over TLS
    without kTLS it is read as memory. auth_cache.entries 0 keeps nothing."""
    tok = token()
    path = "/big/index.m3u8?" + q(tok)
    with Server(ROOT, admin=True, tls=False, extra=rule_yaml([K1])) as srv:
        before = pipes(srv)
        first = srv.get(path)
        expect_eq(first.status, 200, "first fetch")
        expect(len(first.body) > 100000, "tokenised playlist over 64 KiB (%d)" % len(first.body))
        expect_eq(len(first.body), int(first.h("content-length")), "Content-Length")
        expect_eq(sum(u.endswith(q(tok)) for u in uris(first.body)), 1000, "every segment carries the token")
        expect_eq(kept(srv), {"hit": 0, "miss": 1, "bypass": 0}, "rewritten once, to keep")
        again = srv.get(path)
        expect_eq(again.body, first.body, "the kept output")
        expect(pipes(srv) > before, "sent through a pipe (vmsplice)")
        # a slow reader: a small receive window, read late and in pieces,
        # with 24 answers (3.3 MB) pipelined, more than the send buffer
        # takes, so splices come up short and the pipe holds the rest
        slow = connect(srv.port, tls=False, rcvbuf=4096)
        slow.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode() * 24)
        time.sleep(0.5)
        data, deadline = b"", time.time() + 60
        while data.count(first.body) < 24 and time.time() < deadline:
            d = slow.recv(3000)
            if not d:
                break
            data += d
        slow.close()
        expect_eq(data.count(first.body), 24, "slow reader's 24 bodies")
        expect_eq(data.count(b"HTTP/1.1 200"), 24, "and nothing else")
        # a reader that leaves with bytes still in the pipe, then others at once
        for _ in range(3):
            s = connect(srv.port, tls=False, rcvbuf=4096)
            s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode())
            s.recv(2000)
            s.close()
        conns = [srv.conn() for _ in range(6)]
        for c in conns:
            c.send("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path * 3)
        for c in conns:
            for _ in range(3):
                expect_eq(c.read_response().body, first.body, "concurrent kept answers")
            c.close()
        k = kept(srv)
        expect_eq((k["miss"], k["bypass"]), (1, 0), "one rewrite in all")
        expect(k["hit"] >= 45, "kept answers counted (%r)" % k)
        st = stats(srv)["auth"]["rewrite_cache"]
        expect_eq(st["entries"], 1, "/stats: one kept output")
        expect(st["bytes"] > len(first.body), "/stats: its memory")
        # many tokens' kept outputs share huge-page regions (over 2 MiB of
        # them: more than one region), each still its own bytes
        toks = [token(exp=int(time.time()) + 3600 + i) for i in range(20)]
        firsts = [srv.get("/big/index.m3u8?" + q(t)).body for t in toks]
        for _ in range(2):
            for t, b in zip(toks, firsts):
                r = srv.get("/big/index.m3u8?" + q(t))
                expect(r.body == b, "a kept output of its own token")
                expect(uris(r.body)[0].endswith(q(t)), "carrying its token")
        # a master is kept only when the same token asks for it again
        k0 = kept(srv)
        m1 = srv.get("/master.m3u8?" + q(tok))
        expect_eq(kept(srv)["bypass"] - k0["bypass"], 1, "a master asked for once bypasses")
        m2 = srv.get("/master.m3u8?" + q(tok))
        m3 = srv.get("/master.m3u8?" + q(tok))
        k = kept(srv)
        expect_eq((k["bypass"] - k0["bypass"], k["miss"] - k0["miss"], k["hit"] - k0["hit"]), (1, 1, 1),
                  "asked again: kept, then found")
        expect(m1.body == m2.body == m3.body, "the same rewrite each time")
    with Server(ROOT, admin=True, tls=True, extra=rule_yaml([K1])) as srv:
        c = srv.conn()
        a = c.request("GET", path)
        b = c.request("GET", path)
        c.close()
        expect_eq(b.body, a.body, "TLS: the kept output as memory")
        expect_eq(a.body, first.body, "TLS: the same rewrite")
        expect_eq(kept(srv)["hit"], 1, "TLS: kept")
    with Server(ROOT, admin=True, tls=False,
                extra=rule_yaml([K1]) + "auth_cache:\n  entries: 0\n") as srv:
        for _ in range(3):
            expect_eq(srv.get(path).body, first.body, "not kept: rewritten each time")
        expect_eq(kept(srv), {"hit": 0, "miss": 0, "bypass": 3}, "auth_cache.entries 0")


def test_config_errors():
    bad = [
        ("auth:\n  - prefix: /a/\n    keys: [\"abc\"]\n", r":3:12: auth\[0\]\.keys: expected a key of"),
        ("auth:\n  - prefix: a/\n    keys: [\"ab\"]\n", r":2:13: auth\[0\]\.prefix: expected a path"),
        ("auth:\n  - prefix: /a/\n    scheme: hmac\n    keys: [\"ab\"]\n", r":3:13: auth\[0\]\.scheme"),
        ("auth:\n  - prefix: /a/\n", r":2:5: auth\[0\]: expected at least one key"),
        ("auth:\n  - prefix: /a/\n    keys: [\"ab\"]\n    colour: red\n", r":4:5: auth\[0\]: unknown key"),
        ("cache:\n  key_params: [__token__]\nauth:\n  - prefix: /a/\n    keys: [\"ab\"]\n",
         r":4:5: auth\[0\]\.param: expected a parameter that cache.key_params does not list"),
    ]
    for i, (yaml, want) in enumerate(bad):
        p = os.path.join(TMP, "bad%d.yaml" % i)
        with open(p, "w") as f:
            f.write(yaml)
        r = subprocess.run([BIN, "-t", "-c", p], capture_output=True, timeout=10)
        out = (r.stdout + r.stderr).decode()
        expect_eq(r.returncode, 2, "exit status for " + yaml)
        expect(re.search(re.escape(p) + want, out), "message %r in %r" % (want, out))


if __name__ == "__main__":
    os.makedirs(os.path.join(TMP, "empty"), exist_ok=True)
    sys.exit(run_main(globals(), TMP))
