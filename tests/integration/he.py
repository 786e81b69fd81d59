"""Integration-test harness: builds a library, writes a config, starts the
real hlsedge binary and talks to it over real sockets.

Each test module defines functions named test_*; run_tests() runs them in
order, prints one line per test and a closing 'N passed, N failed' line.
"""

import atexit
import hashlib
import os
import random
import re
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import traceback

SRC = os.environ.get("HE_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("HE_BIN") or os.path.join(SRC, "build", "hlsedge")

RENDITIONS = ["288p", "360p", "576p", "720p", "1080p"]

# HE_TLS=1 runs a suite over HTTPS: Server() then listens with TLS on its
# port (plus a plain listener elsewhere), and Conn() / connect() speak TLS.
TLS = os.environ.get("HE_TLS") == "1"
TLS_NAME = "hlsedge.test"  # in the default certificate, with localhost and 127.0.0.1
# HE_TEST_DISABLE_FEATURES=all (or a comma list of kernel feature names)
# reruns a suite on the fallback paths: every Server() then gets the
# configuration key features.disable with those names (test_fallback.py).
DISABLE_FEATURES = [f for f in os.environ.get("HE_TEST_DISABLE_FEATURES", "").split(",") if f]
_CERTS = None


def make_certs(d=None):
    """A test CA and two leaf certificates made with the openssl CLI, each
    PEM file holding the certificate, the CA and the key (hlsedge's format):
      default: RSA 2048 for hlsedge.test, localhost, 127.0.0.1
      b:       EC P-256 for b.test and *.b.test
    Returns {"dir", "ca", "default", "b"}; made once per process."""
    global _CERTS
    if _CERTS and d is None:
        return _CERTS
    if d is None:
        d = tempfile.mkdtemp(prefix="he-certs-")
        atexit.register(shutil.rmtree, d, True)
    os.makedirs(d, exist_ok=True)

    def ossl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=60)

    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
         "-subj", "/CN=hlsedge test CA", "-keyout", ca_key, "-out", ca)
    out = {"dir": d, "ca": ca}
    leaves = {"default": (["-newkey", "rsa:2048"], "/CN=hlsedge.test",
                          "DNS:hlsedge.test,DNS:localhost,IP:127.0.0.1,IP:::1"),
              "b": (["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"], "/CN=b.test",
                    "DNS:b.test,DNS:*.b.test")}
    for name, (key_args, subj, san) in leaves.items():
        key, csr, crt, ext = (os.path.join(d, name + x) for x in (".key", ".csr", ".crt", ".ext"))
        ossl("req", *key_args, "-nodes", "-subj", subj, "-keyout", key, "-out", csr)
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                    "extendedKeyUsage=serverAuth\n" % san)
        ossl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "30",
             "-extfile", ext, "-out", crt)
        pem = os.path.join(d, name + ".pem")
        with open(pem, "wb") as f:
            for part in (crt, ca, key):
                with open(part, "rb") as g:
                    f.write(g.read())
        out[name] = pem
    if _CERTS is None:
        _CERTS = out
    return out


def client_context(ca=None, minimum=None, maximum=None):
    """An ssl client context trusting the test CA (hostname checked)."""
    ctx = ssl.create_default_context(cafile=ca or make_certs()["ca"])
    if minimum:
        ctx.minimum_version = minimum
    if maximum:
        ctx.maximum_version = maximum
    return ctx


def connect(port, host="127.0.0.1", timeout=10, family=socket.AF_INET, rcvbuf=None, tls=None,
            server_hostname=TLS_NAME, context=None, session=None):
    """A connected socket (TLS-wrapped when tls, default: HE_TLS)."""
    tls = TLS if tls is None else tls
    s = socket.socket(family, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect((host, port))
    if tls:
        s = (context or client_context()).wrap_socket(s, server_hostname=server_hostname, session=session)
    return s


def half_close(sock):
    """shutdown(SHUT_WR) of the TCP connection, also under TLS (Python's
    SSLSocket.shutdown would drop the TLS layer)."""
    socket.socket.shutdown(sock, socket.SHUT_WR)


def recv_nb(sock, n=1 << 20):
    """Non-blocking read: bytes, b"" at EOF, None when nothing is ready.
    Under TLS it drains every record already read from the socket, which
    select() cannot see."""
    out = b""
    while True:
        try:
            d = sock.recv(n)
        except (ssl.SSLWantReadError, BlockingIOError):
            return out or None
        if not d:
            return out or b""
        out += d
        if not isinstance(sock, ssl.SSLSocket):
            return out


def recv_until_close(sock, got=b"", errors=(ConnectionError, socket.timeout)):
    """got plus whatever sock delivers until the peer closes it or one of
    errors ends the read (a reset, a timeout): what a client ends up with."""
    try:
        while True:
            d = sock.recv(1 << 20)
            if not d:
                break
            got += d
    except errors:
        pass
    return got


def get_while_truncated(port, path, file, keep, errors, tls=None):
    """GET path on a connection with a small receive buffer, and once the
    response has begun, file truncated in place to keep bytes: what the
    client read until the server closed (or one of errors ended it)."""
    s = connect(port, tls=tls, rcvbuf=16384)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    got = s.recv(65536)
    time.sleep(0.3)
    with open(file, "r+b") as f:
        f.truncate(keep)
    s.settimeout(10)
    got = recv_until_close(s, got, errors)
    s.close()
    return got


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_PORTS_GIVEN = set()
_PORT_RANDOM = random.Random()


def free_port(family=socket.AF_INET, host="127.0.0.1"):
    """A port nothing is bound to, below the kernel's ephemeral range: tests
    run in parallel, and a port the kernel chose for bind(0) is one it may
    hand any client's connect() (loadgen, wrk, curl) before the server
    binds it, which failed a run with EADDRINUSE."""
    high = min(_ephemeral_low(), 65536) - 1
    low = 20000 if high > 21000 else 1024
    for _ in range(200):
        port = _PORT_RANDOM.randint(low, high)
        if port in _PORTS_GIVEN:
            continue
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.bind((host, port))
        except OSError:
            continue
        finally:
            s.close()
        _PORTS_GIVEN.add(port)
        return port
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def blob(n, seed):
    """n deterministic, incompressible bytes: the same for the same seed."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b"%d-%d" % (seed, i)).digest()
        i += 1
    return bytes(out[:n])


def make_library(root, big_mb=24):
    """A synthetic HLS library: 5 renditions of media playlists and .ts
    segments of pseudo-random bytes, plus every content type, a symlink
    out of root, one inside it, and a directory."""
    rnd = random.Random(1234)
    os.makedirs(root, exist_ok=True)
    master = ["#EXTM3U", "#EXT-X-VERSION:3"]
    bw = [400000, 800000, 1500000, 3000000, 6000000]
    res = ["512x288", "640x360", "1024x576", "1280x720", "1920x1080"]
    for i, r in enumerate(RENDITIONS):
        master.append('#EXT-X-STREAM-INF:BANDWIDTH=%d,RESOLUTION=%s,CODECS="avc1.64001f,mp4a.40.2"' % (bw[i], res[i]))
        master.append("%s/index.m3u8" % r)
        d = os.path.join(root, r)
        os.makedirs(d, exist_ok=True)
        media = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:6", "#EXT-X-MEDIA-SEQUENCE:0",
                 "#EXT-X-PLAYLIST-TYPE:VOD"]
        for n in range(4):
            size = (bw[i] * 6 // 8) // (4 if n % 2 else 1) + n
            with open(os.path.join(d, "seg_%05d.ts" % n), "wb") as f:
                f.write(rnd.randbytes(size))
            media += ["#EXTINF:6.000000,", "seg_%05d.ts" % n]
        media.append("#EXT-X-ENDLIST")
        with open(os.path.join(d, "index.m3u8"), "w") as f:
            f.write("\n".join(media) + "\n")
    with open(os.path.join(root, "master.m3u8"), "w") as f:
        f.write("\n".join(master) + "\n")
    files = {
        "misc/init.mp4": 2000, "misc/part.m4s": 3000, "misc/audio.aac": 1500, "misc/subs.vtt": 200,
        "misc/aes.key": 16, "misc/blob.bin": 5000, "misc/empty.ts": 0, "misc/UPPER.TS": 1000,
        "misc/with space.ts": 700,
    }
    for name, size in files.items():
        p = os.path.join(root, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b"WEBVTT\n\n" + b"x" * (size - 8) if name.endswith(".vtt") else rnd.randbytes(size))
    with open(os.path.join(root, "misc", "big.ts"), "wb") as f:
        f.write(rnd.randbytes(big_mb << 20))
    os.makedirs(os.path.join(root, "adir"), exist_ok=True)
    secret = os.path.join(os.path.dirname(root.rstrip("/")), "secret.txt")
    with open(secret, "w") as f:
        f.write("outside root\n")
    for link, target in (("escape.ts", secret), ("misc/escape-dir", "/etc"), ("inside.ts", "360p/seg_00000.ts")):
        p = os.path.join(root, link)
        if not os.path.lexists(p):
            os.symlink(target, p)
    return root


class Response:
    def __init__(self, status, reason, headers, body, raw_head):
        self.status = status
        self.reason = reason
        self.headers = headers  # lower-case name -> value (last wins)
        self.body = body
        self.raw_head = raw_head

    def h(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return "<Response %d %s, %d body bytes>" % (self.status, self.reason, len(self.body))


class Conn:
    """A raw HTTP/1.1 client connection that reads responses exactly."""

    def __init__(self, port, host="127.0.0.1", timeout=10, family=socket.AF_INET, tls=None,
                 server_hostname=TLS_NAME, context=None, session=None, rcvbuf=None):
        self.sock = connect(port, host, timeout, family, rcvbuf=rcvbuf, tls=tls, server_hostname=server_hostname,
                            context=context, session=session)
        self.buf = b""

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin1")
        self.sock.sendall(data)

    def _fill(self):
        d = self.sock.recv(1 << 20)
        if not d:
            raise EOFError("connection closed by server")
        self.buf += d

    def read_response(self, head_only=False):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin1").split("\r\n")
        m = re.match(r"HTTP/1\.[01] (\d{3}) ?(.*)", lines[0])
        if not m:
            raise ValueError("bad status line %r" % lines[0])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        status = int(m.group(1))
        n = 0 if head_only or status in (204, 304) else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return Response(status, m.group(2), headers, body, head)

    def request(self, method, path, headers=None, version="1.1", body=None):
        h = "%s %s HTTP/%s\r\nHost: test\r\n" % (method, path, version)
        for k, v in (headers or {}).items():
            h += "%s: %s\r\n" % (k, v)
        self.send(h + "\r\n")
        if body:
            self.send(body)
        return self.read_response(head_only=(method == "HEAD"))

    def closed_by_peer(self, wait=5.0):
        """True when the server closes the connection within wait seconds."""
        self.sock.settimeout(wait)
        try:
            while True:
                d = self.sock.recv(65536)
                if not d:
                    return True
        except (socket.timeout, TimeoutError):
            return False
        except (ConnectionResetError, ssl.SSLError):
            return True

    def close(self):
        self.sock.close()


class Server:
    """Runs hlsedge on a generated config; stop() checks it exits 0."""

    def __init__(self, root, extra="", workers=1, env=None, listen=None, admin=False, tls=None, tls_extra="",
                 certs=None, disable_features=None, wrap=None):
        """wrap: a command the binary runs under (["setpriv", ...]);
        tls (default: HE_TLS): the listen addresses (port) speak TLS and
        a plain listener goes on plain_port; tls_extra: more lines for the
        tls: section ("  ktls: false\n"); certs: PEM paths (default: the
        make_certs() pair); disable_features: kernel feature names for
        features.disable (default: HE_TEST_DISABLE_FEATURES)."""
        self.wrap = wrap
        self.dir = tempfile.mkdtemp(prefix="he-srv-")
        self.own_ports = listen is None
        self.port = free_port()
        self.listen = listen or ["127.0.0.1:%d" % self.port]
        self.admin_port = free_port() if admin else 0
        self.conf = os.path.join(self.dir, "hlsedge.yaml")
        self.tls = TLS if tls is None else tls
        self.plain_port = self.port
        plain = self.listen
        if self.tls:
            self.plain_port = free_port()
            plain = ["127.0.0.1:%d" % self.plain_port]
            if certs is None:
                c = make_certs()
                certs = [c["default"], c["b"]]
            self.certs = certs
        with open(self.conf, "w") as f:
            f.write("listen: [%s]\n" % ", ".join('"%s"' % l for l in plain))
            if self.tls:
                f.write("tls:\n  listen: [%s]\n" % ", ".join('"%s"' % l for l in self.listen))
                f.write("  certificates: [%s]\n" % ", ".join('"%s"' % c for c in certs))
                f.write(tls_extra)
            f.write("workers: %d\n" % workers)
            f.write("root: %s\n" % root)
            f.write('admin:\n  listen: "%s"\n' % ("127.0.0.1:%d" % self.admin_port if admin else "off"))
            if disable_features is None:
                disable_features = DISABLE_FEATURES
            if disable_features:
                f.write("features:\n  disable: [%s]\n" % ", ".join(disable_features))
            f.write(extra)
        self.log_path = os.path.join(self.dir, "stderr.log")
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.proc = None

    def _repick_ports(self):
        """New ports for a start that lost one to another process."""
        moves = {self.port: free_port()}
        if self.plain_port != self.port:
            moves[self.plain_port] = free_port()
        if self.admin_port:
            moves[self.admin_port] = free_port()
        with open(self.conf) as f:
            text = f.read()
        for old, new in moves.items():
            text = text.replace("127.0.0.1:%d\"" % old, "127.0.0.1:%d\"" % new)
        with open(self.conf, "w") as f:
            f.write(text)
        self.listen = [l.replace(":%d" % self.port, ":%d" % moves[self.port]) for l in self.listen]
        self.port = moves[self.port]
        self.plain_port = moves.get(self.plain_port, self.port)
        self.admin_port = moves.get(self.admin_port, 0)

    def _ready_addresses(self):
        host, port = self.listen[0].rsplit(":", 1)
        out = [(host.strip("[]"), int(port))]
        if self.admin_port:
            out.append(("127.0.0.1", self.admin_port))
        return out

    def start(self):
        raise_nofile()
        for attempt in range(3):
            self.log = open(self.log_path, "wb")
            self.proc = subprocess.Popen((self.wrap or []) + [BIN, "-c", self.conf], stdout=self.log,
                                         stderr=subprocess.STDOUT,
                                         env=self.env)
            if self._wait_listening():
                return self
            log = self.read_log()
            if self.own_ports and attempt < 2 and "address already in use" in log.lower():
                self.log.close()
                self._repick_ports()
                continue
            raise RuntimeError("hlsedge exited %d at start:\n%s" % (self.proc.returncode, log))
        raise AssertionError("unreachable")

    def _wait_listening(self):
        """True once the first listener (and the admin port, when there is
        one) accept; False when the process exits first."""
        deadline = time.time() + 10
        pending = self._ready_addresses()
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            host, port = pending[0]
            try:
                fam = socket.AF_INET6 if ":" in host else socket.AF_INET
                s = socket.socket(fam, socket.SOCK_STREAM)
                s.settimeout(1)
                s.connect((host, port))
                s.close()
                pending.pop(0)
                if not pending:
                    return self._wait_started()
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("hlsedge did not start listening:\n" + self.read_log())

    def _wait_started(self):
        """A connect can reach another process's listener on a port this
        one failed to bind: ready means the log's "listening on" too, or,
        with the error log sent to a file, a second alive after it."""
        deadline = time.time() + 1.0
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            if "] listening on " in self.read_log():
                return True
            time.sleep(0.02)
        return self.proc.poll() is None

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def conn(self, **kw):
        kw.setdefault("tls", self.tls)
        return Conn(self.port, **kw)

    def url(self, path):
        """For curl: https:// with the test CA under TLS."""
        return "%s://127.0.0.1:%d%s" % ("https" if self.tls else "http", self.port, path)

    def curl_args(self):
        return ["--cacert", make_certs()["ca"]] if self.tls else []

    def get(self, path, headers=None, method="GET"):
        c = self.conn()
        try:
            return c.request(method, path, headers)
        finally:
            c.close()

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=20):
        if self.proc is None or self.proc.poll() is not None:
            rc = self.proc.returncode if self.proc else 0
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("hlsedge did not exit within %ds of SIGTERM" % timeout)
        self.log.close()
        log = self.read_log()
        shutil.rmtree(self.dir, ignore_errors=True)
        if rc != 0:
            raise AssertionError("hlsedge exited %s:\n%s" % (rc, log))
        for bad in ("AddressSanitizer", "runtime error:", "LeakSanitizer", "stale completion"):
            if bad in log:
                raise AssertionError("server log shows %r:\n%s" % (bad, log))
        return log

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if exc[0] is None:
            self.stop()
        else:
            try:
                self.stop()
            except AssertionError as e:
                sys.stderr.write(str(e) + "\n")


def expect(cond, msg="check failed"):
    if not cond:
        raise AssertionError(msg)


def expect_eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: got %r, expected %r" % (what, a, b))


def run_main(module_globals, tmp, only=None):
    """A test file's main(): run_tests, then remove its scratch directory
    tmp whatever happened."""
    try:
        return run_tests(module_globals, only)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_with_server(module_globals, tmp, server):
    """A test file's main() for tests that share one server: it is started
    as the module's SRV for run_tests, then stopped (killed if it does not
    stop), and tmp removed whatever happened. Returns (rc, server log)."""
    module_globals["SRV"] = server.start()
    log = ""
    try:
        rc = run_tests(module_globals)
        log = server.stop()
    finally:
        if server.proc and server.proc.poll() is None:
            server.proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return rc, log


def run_tests(module_globals, only=None):
    tests = [(n, f) for n, f in module_globals.items() if n.startswith("test_") and callable(f)]
    tests.sort(key=lambda t: t[1].__code__.co_firstlineno)
    if only:
        tests = [t for t in tests if t[0] in only]
    passed = failed = 0
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            passed += 1
            print("PASS %s (%.2fs)" % (name, time.time() - t0), flush=True)
        except Exception:
            failed += 1
            print("FAIL %s (%.2fs)" % (name, time.time() - t0), flush=True)
            traceback.print_exc()
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0
