"""A connection's life at its edges, through the real binary: requests sent
before a half-close are all answered; a timeout shortened by a live reload
applies to connections that set their timer afterwards, and to those
waiting, from the reload; an exhausted file descriptor limit does not spin
the worker, and accepting resumes when descriptors free up; more than
64 KiB of pipelined requests behind a long response pause reading instead
of killing that response; a FIFO under root neither blocks the worker nor
is served; a file rewritten in place within one second is served anew with
a new ETag; a slow reader of a response with Connection: close gets its
whole tail even while it keeps sending. Every wait is bounded."""

import os
import re
import selectors
import socket
import stat
import sys
import tempfile
import threading
import ssl
import time

sys.path.insert(0, os.path.dirname(__file__))
import he  # noqa: E402
from he import TLS, Server, expect, expect_eq, half_close, make_library, run_main, sha256  # noqa: E402
from he_admin import reload_and_wait  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-lifecycle-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=32)


def lib(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def get_line(path):
    return ("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode()


def test_half_close_answers_every_buffered_request():
    with Server(ROOT) as srv:
        # The first response is long enough to be under way when the EOF
        # arrives; the two complete requests behind it are still answered,
        # the incomplete third is dropped, then the server closes.
        c = srv.conn()
        c.send(get_line("/misc/big.ts") + get_line("/master.m3u8") + get_line("/360p/index.m3u8") +
               b"GET /288p/index.m3u8 HTTP/1.1\r\nHo")
        half_close(c.sock)
        r = c.read_response()
        expect_eq(r.status, 200, "big.ts")
        expect_eq(sha256(r.body), sha256(lib("misc/big.ts")), "big.ts body")
        for p in ("/master.m3u8", "/360p/index.m3u8"):
            r = c.read_response()
            expect_eq((r.status, r.body), (200, lib(p[1:])), p)
        expect(c.closed_by_peer(5), "closed after the last complete request")
        expect_eq(c.buf, b"", "nothing answered for the incomplete request")
        c.close()
        # many small ones, all answered
        paths = ["/master.m3u8", "/288p/index.m3u8", "/misc/aes.key", "/nope.ts"] * 10
        c = srv.conn()
        c.send(b"".join(get_line(p) for p in paths))
        half_close(c.sock)
        for p in paths:
            r = c.read_response()
            expect_eq(r.status, 404 if p == "/nope.ts" else 200, p)
        expect(c.closed_by_peer(5), "closed after the pipeline")
        c.close()
        expect_eq(srv.get("/master.m3u8").status, 200)


def test_shortened_keepalive_applies_after_reload():
    with Server(ROOT, admin=True, extra="timeouts:\n  keepalive: 20s\n") as srv:
        a = srv.conn()
        expect_eq(a.request("GET", "/master.m3u8").status, 200)
        with open(srv.conf) as f:
            text = f.read()
        with open(srv.conf, "w") as f:
            f.write(text.replace("keepalive: 20s", "keepalive: 1s"))
        reload_and_wait(srv, 2)
        t_reload = time.time()
        b = srv.conn()
        expect_eq(b.request("GET", "/master.m3u8").status, 200)
        t0 = time.time()
        expect(b.closed_by_peer(6), "a connection idle after the reload is closed")
        expect(time.time() - t0 < 3, "within about the new keep-alive timeout (%.1fs)" % (time.time() - t0))
        # the one idle across the reload waits no longer than the new value
        # counted from the reload
        expect(a.closed_by_peer(3), "the connection idle across the reload is closed too")
        expect(time.time() - t_reload < 4, "soon after the reload")
        a.close()
        b.close()


def worker_cpu_s(pid):
    """CPU seconds used so far by the worker threads of pid."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                s = f.read()
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]
        if comm.startswith("he-worker"):
            fields = s[s.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def answered(socks, wait):
    """The sockets among socks that received a complete 200 response
    within wait seconds."""
    sel = selectors.DefaultSelector()
    bufs = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        bufs[s] = b""
    done = []
    deadline = time.time() + wait
    while len(done) < len(socks) and time.time() < deadline:
        for key, _ in sel.select(timeout=0.1):
            s = key.fileobj
            try:
                d = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            bufs[s] += d
            if not d or b"\r\n\r\n" in bufs[s]:
                sel.unregister(s)
                if bufs[s].startswith(b"HTTP/1.1 200 "):
                    done.append(s)
    sel.close()
    return done


def test_fd_limit_does_not_spin_and_accepting_resumes():
    wrapper = os.path.join(TMP, "nofile64.sh")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nulimit -n 64 || exit 1\nexec "%s" "$@"\n' % he.BIN)
    os.chmod(wrapper, 0o755)
    real, he.BIN = he.BIN, wrapper
    try:
        srv = Server(ROOT).start()
    finally:
        he.BIN = real
    socks = []
    try:
        expect_eq(srv.get("/master.m3u8").status, 200, "file cached before the limit is hit")
        for _ in range(80):
            s = socket.create_connection(("127.0.0.1", srv.plain_port), timeout=5)  # plain under HE_TLS too
            s.sendall(get_line("/master.m3u8"))
            socks.append(s)
        first = answered(socks, 2)
        expect(20 < len(first) < 80, "some but not all answered under the limit (%d)" % len(first))
        cpu0, t0 = worker_cpu_s(srv.proc.pid), time.time()
        time.sleep(2)
        cpu = (worker_cpu_s(srv.proc.pid) - cpu0) / (time.time() - t0)
        expect(cpu < 0.2, "worker CPU while accept fails: %.0f%% of a core" % (cpu * 100))
        expect("Too many open files" in srv.read_log(), "the failure is logged")
        for s in first:
            s.close()
        rest = [s for s in socks if s not in first]
        late = answered(rest, 5)
        expect_eq(len(late), len(rest), "the waiting connections are accepted once descriptors free up")
    finally:
        for s in socks:
            s.close()
        log = srv.stop()
    expect(log.count("Too many open files") < 20, "logged rate-limited")


def read_responses(c, n):
    """n responses from c as [(status, body)], parsed in one growing buffer
    (Conn.read_response copies what is left of its buffer per response)."""
    buf, off, out = bytearray(c.buf), 0, []
    while len(out) < n:
        i = buf.find(b"\r\n\r\n", off)
        end = -1
        if i >= 0:
            m = re.search(rb"\r\ncontent-length: *(\d+)", bytes(buf[off:i]), re.I)
            end = i + 4 + int(m.group(1))
        if i < 0 or len(buf) < end:
            d = c.sock.recv(1 << 20)
            if not d:
                raise EOFError("closed after %d of %d pipelined responses" % (len(out), n))
            del buf[:off]
            off = 0
            buf += d
            continue
        out.append((int(buf[off + 9:off + 12]), bytes(buf[i + 4:end])))
        off = end
    c.buf = bytes(buf[off:])
    return out


def check_pipeline_behind_long_response(disable_features=None):
    # The pipelined requests arrive while the 32 MiB body waits for a client
    # that reads nothing yet: the server keeps 64 KiB of them, stops
    # reading, and reads on as responses make room. 1.6 MB of them is past
    # any limit at which a connection that kept reading would be closed
    # (128 KiB on the fallback paths); the client sends them from a thread
    # while it reads. Over TLS (not thread-safe) 84 KB go at once.
    n = 1000 if TLS else 20000
    paths = ["/master.m3u8", "/360p/index.m3u8"] * n
    data = get_line("/misc/big.ts") + b"".join(get_line(p) for p in paths)
    with Server(ROOT, disable_features=disable_features) as srv:
        c = srv.conn(timeout=20)
        if TLS:
            c.send(data)
        else:
            sender = threading.Thread(target=c.sock.sendall, args=(data,), daemon=True)
            sender.start()
        r = c.read_response()
        expect_eq(r.status, 200, "big.ts")
        expect_eq(len(r.body), len(lib("misc/big.ts")), "big.ts length")
        expect_eq(sha256(r.body), sha256(lib("misc/big.ts")), "big.ts body")
        bodies = {p: lib(p[1:]) for p in set(paths)}
        for i, (p, got) in enumerate(zip(paths, read_responses(c, len(paths)))):
            expect_eq(got, (200, bodies[p]), "pipelined request %d %s" % (i, p))
        if not TLS:
            sender.join(10)
            expect(not sender.is_alive(), "everything was sent")
        expect_eq(c.request("GET", "/master.m3u8").status, 200, "the connection goes on")
        c.close()


def test_pipeline_past_64k_pauses_reading():
    check_pipeline_behind_long_response()


def test_pipeline_past_64k_pauses_reading_on_fallback_paths():
    check_pipeline_behind_long_response(["all"])


def test_fifo_is_refused_without_blocking():
    fifo = os.path.join(ROOT, "misc", "pipe.ts")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    with Server(ROOT) as srv:
        try:
            c = srv.conn(timeout=3)
            try:
                r = c.request("GET", "/misc/pipe.ts")
            except OSError as e:
                raise AssertionError("no answer for a FIFO: %r" % e)
            expect_eq(r.status, 404, "a FIFO is not served (nginx: 404)")
            c.close()
            expect_eq(srv.get("/master.m3u8").status, 200, "a new connection is served")
            expect_eq(srv.get("/misc/pipe.ts").status, 404, "and the FIFO again")
        finally:
            # a worker blocked in open() of the FIFO comes back when a
            # writer opens it: the server can stop even before the fix
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
    expect(stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO is still there")
    os.unlink(fifo)


def test_rewrite_in_place_within_a_second():
    os.makedirs(os.path.join(ROOT, "live"), exist_ok=True)
    p = os.path.join(ROOT, "live", "index.m3u8")
    one = b"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:1\n#EXTINF:2.0,\nseg1.ts\n"
    two = b"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:2\n#EXTINF:2.0,\nseg2.ts\n"
    expect_eq(len(one), len(two), "same size")
    sec = int(time.time()) * 1000000000
    with open(p, "wb") as f:
        f.write(one)
    os.utime(p, ns=(sec + 100000000, sec + 100000000))
    with Server(ROOT, extra="fd_cache:\n  valid: 0s\n") as srv:
        c = srv.conn()
        r1 = c.request("GET", "/live/index.m3u8")
        expect_eq((r1.status, r1.body), (200, one), "first version")
        ino = os.stat(p).st_ino
        with open(p, "r+b") as f:  # in place, as ffmpeg does without temp_file
            f.write(two)
        os.utime(p, ns=(sec + 600000000, sec + 600000000))
        expect_eq(os.stat(p).st_ino, ino, "same inode")
        r2 = c.request("GET", "/live/index.m3u8")
        expect_eq((r2.status, r2.body), (200, two), "second version, same second and size")
        expect(r2.h("etag") != r1.h("etag"), "a new ETag (%s, %s)" % (r1.h("etag"), r2.h("etag")))
        r3 = c.request("GET", "/live/index.m3u8", headers={"If-None-Match": r1.h("etag")})
        expect_eq((r3.status, r3.body), (200, two), "the old ETag does not match")
        r4 = c.request("GET", "/live/index.m3u8", headers={"If-None-Match": r2.h("etag")})
        expect_eq(r4.status, 304, "the new one does")
        c.close()
    os.unlink(p)


def slow_reader_gets_the_tail(tls, tls_extra=""):
    path = "/720p/seg_00001.ts"
    want = lib(path[1:])
    with Server(ROOT, tls=tls, tls_extra=tls_extra) as srv:
        s = he.connect(srv.port, rcvbuf=4096, tls=False)
        if tls:
            # an EOF without close_notify raises instead of reading as b""
            s = he.client_context().wrap_socket(s, server_hostname=he.TLS_NAME,
                                                suppress_ragged_eofs=False)
        s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path).encode())
        nxt = b"GET /master.m3u8 HTTP/1.1\r\nHost: t\r\n\r\n"
        got, reset, sent, deadline = b"", None, 0, time.time() + 30
        time.sleep(0.3)  # the server's send buffer fills; the tail waits in it
        while time.time() < deadline:
            try:
                d = s.recv(2048)
            except (ConnectionError, ssl.SSLError) as e:
                reset = e
                break
            if not d:
                break
            got += d
            if sent < len(nxt) and len(got) > (sent + 1) * 8192:
                try:
                    s.send(nxt[sent:sent + 1])
                    sent += 1
                except (ConnectionError, ssl.SSLError) as e:
                    reset = e
                    break
            time.sleep(0.002)
        s.close()
        expect(reset is None, "no reset and, under TLS, a close_notify (%r after %d bytes)" % (reset, len(got)))
        head, _, body = got.partition(b"\r\n\r\n")
        expect(head.startswith(b"HTTP/1.1 200"), head[:40])
        expect_eq(len(body), len(want), "every byte of the body")
        expect_eq(sha256(body), sha256(want), "the body")
        expect(sent > 0, "bytes were sent after the response (%d)" % sent)


def test_slow_reader_gets_the_tail_after_connection_close():
    # The response is done for the server once its last byte is in the
    # kernel; a client still reading it slowly, and still sending (the
    # next pipelined request, byte by byte), must get every byte. A plain
    # close() there resets on the next byte that arrives and throws away
    # the unsent tail; the server half-closes and reads on instead.
    slow_reader_gets_the_tail(False)


def test_slow_reader_gets_the_tail_and_close_notify_over_tls():
    # The same over TLS, with kTLS where the kernel has it and with
    # SSL_write: the close sends close_notify (RFC 8446 6.1) as part of
    # the tail, then half-closes and reads on through OpenSSL; a close()
    # right after SSL_shutdown reset the connection under the tail and
    # the alert.
    slow_reader_gets_the_tail(True)
    slow_reader_gets_the_tail(True, "  ktls: false\n")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, sys.argv[1:]))
