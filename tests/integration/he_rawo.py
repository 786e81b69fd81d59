"""A raw-socket origin for cache tests: it answers with exactly the bytes a
test scripts, so it can send what tests/integration/origin.py never would
(over-long header lines, slow heads, 304s, Set-Cookie ...).

    with RawOrigin({"/a.ts": handler}) as o:
        ... o.url ... o.count("/a.ts") ...

handler(request) gets (method, target, {lower-case name: value}) and
returns the response's bytes, or a list of (seconds to wait, bytes) pieces
sent in turn; the connection is closed after it. Routes are looked up by
key(target): the whole target by default, or the path alone with
key=path_of. An unknown one gets a 404."""

import socket
import threading
import time


def path_of(target):
    return target.split("?", 1)[0]


def response(status=200, body=b"", headers=(), chunked=False, length=None):
    """Raw response bytes; headers is a list of (name, value) or raw lines.
    length: the Content-Length to announce when it is not len(body) (a head
    alone, body sent later); 304s and chunked bodies announce none."""
    reason = {200: "OK", 304: "Not Modified", 403: "Forbidden", 404: "Not Found"}.get(status, "X")
    h = "HTTP/1.1 %d %s\r\n" % (status, reason)
    for x in headers:
        h += (x if isinstance(x, str) else "%s: %s" % x) + "\r\n"
    if chunked:
        h += "Transfer-Encoding: chunked\r\n"
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
    elif status != 304:
        h += "Content-Length: %d\r\n" % (len(body) if length is None else length)
    h += "Connection: close\r\n\r\n"
    return h.encode("latin1") + (b"" if status == 304 else body)


def cache_conf(origin, ssd=None, prefetch=0, extra_cache="", total_timeout="30s"):
    """The YAML for an edge with origin as its origin: a 64 MiB RAM tier
    that admits everything, no stale serving, one try per origin request;
    extra_cache adds lines to the cache section."""
    y = "cache:\n  ram_size: 64m\n  admission: false\n  prefetch: %d\n" % prefetch
    y += "  stale_while_revalidate: 0s\n  stale_if_error: 0s\n" + extra_cache
    if ssd:
        y += '  ssd: ["%s:64m"]\n' % ssd
    y += 'origin:\n  urls: ["%s"]\n  retries: 0\n  connect_timeout: 1s\n' % origin.url
    y += "  read_timeout: 5s\n  total_timeout: %s\n" % total_timeout
    return y


class RawOrigin:
    def __init__(self, routes, key=lambda target: target):
        self.routes = routes
        self.key = key
        self.requests = []
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping = True
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            pass
        self.thread.join(5)
        self.sock.close()

    def count(self, k):
        """Requests whose target's key is k."""
        with self.lock:
            return sum(1 for r in self.requests if self.key(r[1]) == k)

    def last(self, k):
        with self.lock:
            for r in reversed(self.requests):
                if self.key(r[1]) == k:
                    return r
        return None

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if self.stopping:
                c.close()
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        c.settimeout(10)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            lines = buf.split(b"\r\n\r\n", 1)[0].decode("latin1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            hdrs = {}
            for line in lines[1:]:
                k, v = line.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
            req = (method, target, hdrs)
            with self.lock:
                self.requests.append(req)
            fn = self.routes.get(self.key(target))
            out = fn(req) if fn else response(404, b"no route\n")
            for wait, data in [(0, out)] if isinstance(out, bytes) else out:
                if wait:
                    time.sleep(wait)
                c.sendall(data)
        except OSError:
            pass
        finally:
            c.close()
