"""File bodies from root by vmsplice of the file's mapping, through the real
binary (server/handler/file.c he_file_splice_peek, server/net/send.c
he_send_splice): send.file_splice (default on) sends a span of 64 KiB or
more over plain TCP by vmsplice and splice, the rest by sendfile.

Checked here: bodies byte-identical, whole and as ranges, the bytes counted
on /stats and /metrics; none with the key off; a slow reader; bytes a short
splice left in the pipe sent before anything else, also when the rest of
the body is under 64 KiB (they once went again by sendfile, and the pipe's
copy opened the next response on the connection); HTTP/2 cleartext frames
unchanged; and a file truncated in place mid-send ends that response (the
mapping past the end faults inside vmsplice: no SIGBUS) and its fd-cache
entry, so the next request sees the new size. Pipes are as large as a
turn moves (1 MiB), and a server without CAP_SYS_RESOURCE keeps its pipes
within three quarters of the user's fs.pipe-user-pages-soft: many
connections each holding a pipe get smaller ones past that, not the
two-page pipes the kernel would give.
"""
import fcntl
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from he import Conn, Server, connect, expect, expect_eq, get_while_truncated, make_library, run_main  # noqa: E402
from he_admin import admin_get, stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-fsplice-")
ROOT = make_library(os.path.join(TMP, "lib"))
BIG = os.path.join(ROOT, "misc", "big.ts")
os.makedirs(os.path.dirname(BIG), exist_ok=True)
DATA = os.urandom((3 << 20) + 12345)  # not a multiple of a page: a short tail
with open(BIG, "wb") as f:
    f.write(DATA)


def spliced(srv):
    return stats(srv)["send"]["file_vmsplice_bytes"]


def metric(srv, name):
    total = 0
    for line in admin_get(srv, "/metrics").body.decode().split("\n"):
        if line.startswith(name + "{"):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def test_whole_and_ranges_by_vmsplice():
    with Server(ROOT, admin=True) as srv:
        for _ in range(3):
            r = srv.get("/misc/big.ts")
            expect_eq(r.status, 200)
            expect(r.body == DATA, "whole body identical")
        n = spliced(srv)
        # each response's last span under 64 KiB goes by sendfile
        expect(3 * (len(DATA) - (64 << 10)) <= n <= 3 * len(DATA), "vmspliced %d of %d" % (n, 3 * len(DATA)))
        expect_eq(metric(srv, "hlsedge_file_vmsplice_bytes_total"), n, "/metrics agrees with /stats")
        for first, last in ((1, 1 << 20), (4095, (2 << 20) + 7), (len(DATA) - 200000, len(DATA) - 1)):
            r = srv.get("/misc/big.ts", headers={"Range": "bytes=%d-%d" % (first, last)})
            expect_eq(r.status, 206)
            expect(r.body == DATA[first:last + 1], "range %d-%d identical" % (first, last))
        # a range under 64 KiB is a file range only
        before = spliced(srv)
        r = srv.get("/misc/big.ts", headers={"Range": "bytes=100-30000"})
        expect(r.body == DATA[100:30001], "short range identical")
        expect_eq(spliced(srv), before, "a short range goes by sendfile")


def test_key_off_is_sendfile():
    with Server(ROOT, admin=True, extra="send:\n  file_splice: false\n") as srv:
        r = srv.get("/misc/big.ts")
        expect(r.body == DATA, "body identical")
        expect_eq(spliced(srv), 0, "nothing vmspliced with send.file_splice: false")


def test_slow_reader_gets_every_byte():
    """Small receive buffer: many short splices, bytes waiting in the pipe."""
    with Server(ROOT, admin=True) as srv:
        s = connect(srv.port, rcvbuf=16384)
        s.sendall(b"GET /misc/big.ts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = b""
        s.settimeout(20)
        while True:
            if len(got) < (512 << 10):
                time.sleep(0.001)  # the first half MiB slowly: the socket fills
            b = s.recv(65536)
            if not b:
                break
            got += b
        s.close()
        body = got[got.index(b"\r\n\r\n") + 4:]
        expect(body == DATA, "slow reader's body identical (%d of %d bytes)" % (len(body), len(DATA)))
        expect(spliced(srv) > 0, "sent by vmsplice")


def test_tail_in_the_pipe_is_sent_once():
    """A splice the socket took only part of leaves bytes in the pipe; when
    what is left of the body is then under 64 KiB, it must still come from
    the pipe, not again from the file by sendfile. Readers that stall and
    then drain, over sizes whose last vmsplice (256 KiB steps from the
    start) takes the whole rest of the body: 64 KiB to 256 KiB past a
    step."""
    names = []
    for i, tail in enumerate((65537, 100000, 150000, 262143)):
        data = os.urandom((4 << 18) + tail)
        name = "misc/tail%d.ts" % i
        with open(os.path.join(ROOT, name), "wb") as f:
            f.write(data)
        names.append((name, data))
    # a low TCP_NOTSENT_LOWAT: the socket takes a little at a time, so
    # splices come up short all the way through
    with Server(ROOT, admin=True, extra="send:\n  notsent_lowat: 16k\n") as srv:
        # one keep-alive connection for all: bytes a response left in the
        # pipe would open the next one
        s = connect(srv.port, rcvbuf=16384)
        s.settimeout(20)
        buf = b""
        for name, data in names:
            s.sendall(b"GET /%s HTTP/1.1\r\nHost: x\r\n\r\n" % name.encode())
            time.sleep(0.02)  # the socket and the pipe fill
            while b"\r\n\r\n" not in buf:
                buf += s.recv(65536)
            head, buf = buf.split(b"\r\n\r\n", 1)
            expect(head.startswith(b"HTTP/1.1 200"), "%s: %r" % (name, head[:40]))
            while len(buf) < len(data):
                b = s.recv(1 << 20)
                expect(b, "%s: connection open" % name)
                buf += b
            body, buf = buf[:len(data)], buf[len(data):]
            expect(body == data, "%s: bytes" % name)
        s.close()
        expect(spliced(srv) > 0, "sent by vmsplice")
    for name, _ in names:
        os.unlink(os.path.join(ROOT, name))


def test_h2c_frames_unchanged():
    """HTTP/2 DATA frames are units of 16 KiB: file ranges, not spliced."""
    from he_h2 import get_once
    with Server(ROOT, admin=True, extra="http2:\n  h2c: true\n") as srv:
        hdrs, body = get_once(srv.port, "/misc/big.ts", wait=30)
        expect_eq(hdrs.get(":status"), "200")
        expect(body == DATA, "h2c body identical (%d of %d bytes)" % (len(body), len(DATA)))
        expect_eq(spliced(srv), 0, "frames go by sendfile")


def test_file_truncated_mid_send():
    p = os.path.join(ROOT, "misc", "trunc.ts")
    data = os.urandom(8 << 20)
    with open(p, "wb") as f:
        f.write(data)
    with Server(ROOT, admin=True) as srv:
        got = get_while_truncated(srv.port, "/misc/trunc.ts", p, 100000,
                                  (ConnectionResetError, socket.timeout))
        expect(len(got) < len(data), "the response was cut (%d bytes)" % len(got))
        expect_eq(srv.get("/master.m3u8").status, 200, "server alive")
        expect(spliced(srv) > 0, "the body was going by vmsplice")
        wait_for(lambda: "trunc.ts shrank while sending (its mapping faulted)" in srv.read_log(), what="the shrink logged")
        # the entry went with the error: the new size at once, no revalidation wait
        r = srv.get("/misc/trunc.ts")
        expect_eq(len(r.body), 100000, "the truncated file is served at its new size")
        expect(r.body == data[:100000], "and its bytes")
    os.unlink(p)


F_GETPIPE_SZ = 1032


def server_pipe_sizes(pid):
    """The sizes of the server's pipes, read through /proc/PID/fd (each
    pipe once, by its read end's inode)."""
    sizes, seen = [], set()
    d = "/proc/%d/fd" % pid
    for n in os.listdir(d):
        try:
            target = os.readlink(os.path.join(d, n))
        except OSError:
            continue
        if not target.startswith("pipe:") or target in seen:
            continue
        try:
            fd = os.open(os.path.join(d, n), os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            sizes.append(fcntl.fcntl(fd, F_GETPIPE_SZ))
            seen.add(target)
        finally:
            os.close(fd)
    return sizes


def test_pipes_within_the_user_budget():
    soft = int(open("/proc/sys/fs/pipe-user-pages-soft").read())
    with Server(ROOT, admin=True) as srv:  # as root: no budget
        expect("pipe_budget_pages=0" in stats(srv)["features"]["summary"], "no pipe budget with CAP_SYS_RESOURCE")
    p = os.path.join(ROOT, "misc", "pipes.ts")
    data = os.urandom(16 << 20)
    with open(p, "wb") as f:
        f.write(data)
    conns = 56  # past 48 pipes of 1 MiB: 3/4 of the default 16384 pages
    wrap = ["setpriv", "--bounding-set", "-sys_resource,-sys_admin"]
    # the bodies are read one after the other through 16 KiB windows: on a
    # slow host the last waits longer than the default send timeout (30 s)
    extra = "limits:\n  max_connections: 256\ntimeouts:\n  send: 10m\n"
    with Server(ROOT, admin=True, wrap=wrap, extra=extra) as srv:
        summary = stats(srv)["features"]["summary"]
        expect("pipe_budget_pages=%d" % soft in summary, "the budget is the user's: " + summary)
        clients = []
        for _ in range(conns):
            c = Conn(srv.port, timeout=30, rcvbuf=16384)
            c.send("GET /misc/pipes.ts HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(c)
        # every connection fills its socket and holds a pipe with bytes in it
        wait_for(lambda: len(server_pipe_sizes(srv.proc.pid)) >= conns, what="a pipe per connection")
        sizes = server_pipe_sizes(srv.proc.pid)
        pages = sum(sizes) // 4096
        expect(max(sizes) <= (1 << 20), "no pipe over 1 MiB: %r" % sorted(set(sizes)))
        expect(min(sizes) >= (64 << 10), "no pipe cut below the kernel's default: %r" % sorted(set(sizes)))
        if soft:
            # the pipes it grew stay within its share; past it they keep
            # the kernel's 16 pages, and all stay under the kernel's limit
            grown = sum(x for x in sizes if x > (64 << 10)) // 4096
            expect(grown <= soft * 3 // 4, "%d pages of grown pipes within 3/4 of %d" % (grown, soft))
            expect(pages < soft, "%d pages in all, under %d" % (pages, soft))
            expect((1 << 20) in sizes and min(sizes) < (1 << 20), "1 MiB pipes, then smaller: %r" % sorted(set(sizes)))
        for c in clients:
            r = c.read_response()
            expect(r.body == data, "every body identical (%d of %d bytes)" % (len(r.body), len(data)))
            c.close()
    os.unlink(p)


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, only=sys.argv[1:] or None))
