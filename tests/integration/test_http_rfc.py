"""HTTP/1.1 conformance points (RFC 9110, RFC 9112) through the real
binary, most over raw sockets since curl will not send these requests:

  - Upgrade (h2c, websocket) is ignored and the connection stays usable;
    CONNECT gets 405 and the connection closes;
  - timeouts.keepalive: 0 announces Connection: close and closes;
  - absolute-form targets are served as their path (the access log and
    the origin see origin-form);
  - HTTP/1.1 needs exactly one Host, HTTP/1.0 none, and never two;
  - If-Match lines form one list; a precondition or range value too long
    for its buffer counts as absent rather than as a cut, different value;
  - HEAD gets no body with 400, 414 and 431 either;
  - a 204 has no Content-Length;
  - Last-Modified is never later than Date."""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, make_library, recv_until_close, run_with_server  # noqa: E402
from he_admin import wait_for  # noqa: E402
from origin import Origin  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-rfc-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
ALOG = os.path.join(TMP, "access.log")
SRV = None


def lib(path):
    with open(os.path.join(ROOT, path.lstrip("/")), "rb") as f:
        return f.read()


def exchange(data, head_only=False, srv=None):
    """Sends data on a new connection; (first response, bytes that followed
    it until the server closed the connection)."""
    c = (srv or SRV).conn()
    c.send(data)
    r = c.read_response(head_only=head_only)
    c.sock.settimeout(5)
    rest = recv_until_close(c.sock, c.buf)
    c.close()
    return r, rest


def test_upgrade_h2c_ignored():
    # what `curl --http2 http://...` sends: two requests on one connection
    out = subprocess.run(["curl", "-s", "--http2", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code}\n"]
                         + SRV.curl_args() + [SRV.url("/master.m3u8"), SRV.url("/360p/index.m3u8")],
                         capture_output=True, timeout=30, text=True)
    expect_eq(out.stdout.split(), ["200", "200"], "curl --http2 statuses")
    for upgrade in ("h2c", "websocket"):
        c = SRV.conn()
        r = c.request("GET", "/master.m3u8", {"Connection": "Upgrade, HTTP2-Settings", "Upgrade": upgrade,
                                              "HTTP2-Settings": "AAMAAABkAAQCAAAAAAIAAAAA",
                                              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        expect_eq((r.status, r.body), (200, lib("master.m3u8")), upgrade)
        expect(r.h("upgrade") is None, "no Upgrade in the answer")
        r = c.request("GET", "/360p/index.m3u8")
        expect_eq((r.status, r.body), (200, lib("360p/index.m3u8")), upgrade + ": the next request")
        c.close()
    # pipelined behind it in the same segment: parsed as HTTP, not as another protocol
    c = SRV.conn()
    c.send("GET /master.m3u8 HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
           "HEAD /master.m3u8 HTTP/1.1\r\nHost: t\r\n\r\n")
    expect_eq(c.read_response().status, 200)
    r = c.read_response(head_only=True)
    expect_eq(r.status, 200, "pipelined request after Upgrade")
    r = c.request("GET", "/misc/aes.key")
    expect_eq(r.body, lib("misc/aes.key"))
    c.close()


def test_connect_405_and_close():
    # tunnel bytes sent right behind the CONNECT are not read as a request
    r, rest = exchange(b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n"
                       b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40)
    expect_eq(r.status, 405)
    expect_eq(r.h("allow"), "GET, HEAD, OPTIONS")
    expect_eq(r.h("connection"), "close")
    expect_eq(rest, b"", "nothing after the 405")
    expect_eq(SRV.get("/master.m3u8").status, 200, "after CONNECT")


def test_keepalive_zero_closes_with_notice():
    with Server(ROOT, extra="timeouts:\n  keepalive: 0\n") as srv:
        for version, hdrs in (("1.1", {}), ("1.0", {"Connection": "keep-alive"})):
            c = srv.conn()
            r = c.request("GET", "/master.m3u8", hdrs, version=version)
            expect_eq((r.status, r.body), (200, lib("master.m3u8")), version)
            expect_eq(r.h("connection"), "close", "HTTP/%s announces the close" % version)
            expect(c.closed_by_peer(2), "closed after the response")
            c.close()
        # error pages and 304s too
        r, rest = exchange(b"GET /nope.ts HTTP/1.1\r\nHost: t\r\n\r\n", srv=srv)
        expect_eq((r.status, r.h("connection"), rest), (404, "close", b""))
        etag = srv.get("/master.m3u8").h("etag")
        r, rest = exchange(("GET /master.m3u8 HTTP/1.1\r\nHost: t\r\nIf-None-Match: %s\r\n\r\n" % etag).encode(),
                           srv=srv)
        expect_eq((r.status, r.h("connection"), rest), (304, "close", b""))


def test_keepalive_zero_cache_path():
    origin = Origin(files={"/o/seg.ts": b"s" * 3000}).start()
    try:
        conf = ("timeouts:\n  keepalive: 0\ncache:\n  ram_size: 16m\n  admission: false\n"
                'origin:\n  urls: ["%s"]\n  retries: 0\n' % origin.url)
        with Server(ROOT, extra=conf) as srv:
            for _ in range(2):  # a miss, then a RAM hit
                r, rest = exchange(b"GET /o/seg.ts HTTP/1.1\r\nHost: t\r\n\r\n", srv=srv)
                expect_eq((r.status, len(r.body)), (200, 3000))
                expect_eq((r.h("connection"), rest), ("close", b""))
    finally:
        origin.stop()


def test_absolute_form():
    host = "127.0.0.1:%d" % SRV.port
    for target in ("http://%s/master.m3u8" % host, "HTTP://%s/master.m3u8?token=1" % host,
                   "https://other.example:8443/master.m3u8", "hTTp://[::1]/master.m3u8#frag"):
        c = SRV.conn()
        r = c.request("GET", target)
        expect_eq((r.status, r.body), (200, lib("master.m3u8")), target)
        r = c.request("GET", "/360p/index.m3u8")  # the connection is still in step
        expect_eq(r.status, 200, target + ": next request")
        c.close()
    # an empty path is "/"; OPTIONS to the server as a whole
    expect_eq(SRV.get("http://%s" % host).status, 404, "empty path is /")
    expect_eq(SRV.get("http://%s?x=1" % host).status, 404, "empty path with a query")
    expect_eq(SRV.get("http://%s" % host, method="OPTIONS").status, 204)
    # an http URI without a host is invalid, one with userinfo refused
    # (RFC 9110 4.2.1, 4.2.4); other schemes are not ours
    for target in ("http:///master.m3u8", "http://", "http://user@%s/master.m3u8" % host,
                   "ftp://%s/master.m3u8" % host):
        r, rest = exchange(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % target).encode())
        expect_eq((r.status, rest), (400, b""), target)
    # the access log records origin-form
    target = "/288p/index.m3u8?abs=1"

    def logged():
        with open(ALOG) as f:
            return [l for l in f if "abs=1" in l] or None
    expect_eq(SRV.get("http://%s%s" % (host, target)).status, 200)
    line = wait_for(logged, 5, "the access log line")[0]
    expect('"GET %s HTTP/1.1"' % target in line, "logged target: %r" % line)


def test_absolute_form_to_origin():
    origin = Origin(files={"/o/abs.ts": b"a" * 2000}).start()
    try:
        conf = 'cache:\n  ram_size: 16m\n  admission: false\norigin:\n  urls: ["%s"]\n  retries: 0\n' % origin.url
        with Server(ROOT, extra=conf) as srv:
            c = srv.conn()
            r = c.request("GET", "http://edge.example/o/abs.ts")
            expect_eq((r.status, len(r.body)), (200, 2000))
            r = c.request("GET", "/o/abs.ts")
            expect_eq((r.status, len(r.body)), (200, 2000))
            c.close()
            expect_eq(origin.count("/o/abs.ts"), 1, "origin asked once, in origin-form, same cache key")
    finally:
        origin.stop()


def test_host_required_once():
    for req in (b"GET /master.m3u8 HTTP/1.1\r\n\r\n",
                b"GET /master.m3u8 HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
                b"GET /master.m3u8 HTTP/1.1\r\nHost: a\r\nX: 1\r\nhost: b\r\n\r\n",
                b"GET /master.m3u8 HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
                b"GET http://a/master.m3u8 HTTP/1.1\r\n\r\n"):
        r, rest = exchange(req)
        expect_eq((r.status, r.h("connection"), rest), (400, "close", b""), repr(req))
    r, _ = exchange(b"GET /master.m3u8 HTTP/1.0\r\n\r\n")
    expect_eq((r.status, r.body), (200, lib("master.m3u8")), "HTTP/1.0 without Host")
    r, _ = exchange(b"GET /master.m3u8 HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n")
    expect_eq(r.status, 200, "empty Host")
    expect_eq(SRV.get("/master.m3u8").status, 200)


def test_if_match_lines_and_long_values():
    p = "/360p/seg_00002.ts"
    r = SRV.get(p)
    etag, lm = r.h("etag"), r.h("last-modified")
    n = len(lib(p))

    def get(hdr_lines):
        c = SRV.conn()
        c.send("GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (p, "".join("%s: %s\r\n" % kv for kv in hdr_lines)))
        r = c.read_response()
        c.close()
        return r
    expect_eq(get([("If-Match", '"nope"'), ("If-Match", etag)]).status, 200, "If-Match on two lines")
    expect_eq(get([("If-Match", etag), ("If-Match", '"nope"')]).status, 200, "If-Match on two lines, reversed")
    expect_eq(get([("If-Match", '"nope"'), ("If-Match", '"nope2"')]).status, 412, "no line matches")
    expect_eq(get([("If-None-Match", '"nope"'), ("If-None-Match", etag)]).status, 304, "If-None-Match lines")
    # longer than the buffer: ignored, not cut into a list that does not match
    many = ", ".join('"%040d"' % i for i in range(8))
    expect_eq(get([("If-Match", many + ", " + etag)]).status, 200, "long If-Match")
    expect_eq(get([("If-Match", many), ("If-Match", etag)]).status, 200, "long If-Match over two lines")
    # a date padded past its buffer is no date (the cut would parse)
    pad = " " * 20 + "x"
    expect_eq(get([("If-Unmodified-Since", "Sat, 01 Jan 2000 00:00:00 GMT" + pad)]).status, 200, "long IUS")
    expect_eq(get([("If-Unmodified-Since", "Sat, 01 Jan 2000 00:00:00 GMT")]).status, 412, "IUS older")
    expect_eq(get([("If-Modified-Since", lm + pad)]).status, 200, "long IMS")
    expect_eq(get([("If-Modified-Since", lm)]).status, 304, "IMS equal")
    # a Range list cut after its first member would ask for less
    r = get([("Range", "bytes=0-9" + " " * 130 + ",20-29")])
    expect_eq((r.status, len(r.body)), (200, n), "long Range")
    r = get([("Range", "bytes=0-9"), ("If-Range", etag + " " * 130 + "x")])
    expect_eq((r.status, len(r.body)), (200, n), "long If-Range")
    r = get([("Range", "bytes=0-9"), ("If-Range", etag)])
    expect_eq((r.status, len(r.body)), (206, 10), "If-Range match")


def test_head_error_pages_have_no_body():
    cases = [
        (b"HEAD /" + b"a" * 2000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        (b"HEAD /master.m3u8 HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 100)
                                                                  for i in range(60)) + b"\r\n", 431),
        (b"HEAD /master.m3u8 HTTP/1.1\r\nBad Header: 1\r\n\r\n", 400),
        (b"HEAD /master.m3u8 HTTP/1.1\r\n\r\n", 400),
        (b"HEAD /a%00b HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ]
    for req, status in cases:
        r, rest = exchange(req, head_only=True)
        expect_eq(r.status, status, repr(req[:30]))
        expect(int(r.h("content-length")) > 0, "Content-Length of the GET answer")
        expect_eq(rest, b"", "%d to HEAD: no body" % status)
    # GET still gets the page
    r, _ = exchange(b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    expect_eq((r.status, r.body), (414, b"414 URI Too Long\n"))
    expect_eq(SRV.get("/master.m3u8").status, 200)


def test_204_without_content_length():
    for target in ("*", "/master.m3u8"):
        c = SRV.conn()
        c.send("OPTIONS %s HTTP/1.1\r\nHost: t\r\n\r\n" % target)
        r = c.read_response()
        expect_eq(r.status, 204, target)
        expect(b"content-length" not in r.raw_head.lower(), "204 with Content-Length: %r" % r.raw_head)
        expect_eq(c.request("GET", "/master.m3u8").status, 200, "in step after the 204")
        c.close()


def test_future_mtime_last_modified_is_date():
    import email.utils
    p = os.path.join(ROOT, "misc", "future.m3u8")
    with open(p, "w") as f:
        f.write("#EXTM3U\n")
    future = time.time() + 10 * 365 * 86400
    os.utime(p, (future, future))
    r = SRV.get("/misc/future.m3u8")
    expect_eq(r.status, 200)
    lm, date = r.h("last-modified"), r.h("date")
    expect_eq(lm, date, "Last-Modified of a future file")
    # conditionals compare the time that was sent, not the file's
    r2 = SRV.get("/misc/future.m3u8", {"If-Modified-Since": lm})
    expect_eq(r2.status, 304 if r2.h("date") == lm else 200, "IMS with the sent Last-Modified")
    r2 = SRV.get("/misc/future.m3u8", {"If-Unmodified-Since": lm})
    expect_eq(r2.status, 200 if r2.h("date") == lm else 412, "IUS with the sent Last-Modified")
    r2 = SRV.get("/misc/future.m3u8", {"If-Unmodified-Since": date_after(lm, 60)})
    expect_eq(r2.status, 200, "IUS a minute on")
    # a date equal to Date is no strong validator: If-Range with it sends the whole file
    r2 = SRV.get("/misc/future.m3u8", {"Range": "bytes=0-2", "If-Range": lm})
    expect_eq((r2.status, r2.body), (200, b"#EXTM3U\n"), "If-Range with the sent Last-Modified")
    r2 = SRV.get("/misc/future.m3u8", {"If-None-Match": r.h("etag")})
    expect_eq(r2.status, 304, "ETag unchanged")
    # a file from the past keeps its own time
    r = SRV.get("/master.m3u8")
    expect_eq(email.utils.parsedate_to_datetime(r.h("last-modified")).timestamp(),
              float(int(os.stat(os.path.join(ROOT, "master.m3u8")).st_mtime)), "past mtime")


def date_after(http_date, seconds):
    import email.utils
    t = email.utils.parsedate_to_datetime(http_date).timestamp() + seconds
    return email.utils.formatdate(t, usegmt=True)


def main():
    extra = "limits:\n  header_bytes: 4096\n  uri_bytes: 1024\nlog:\n  access: %s\n" % ALOG
    return run_with_server(globals(), TMP, Server(ROOT, extra=extra, workers=2))[0]


if __name__ == "__main__":
    sys.exit(main())
