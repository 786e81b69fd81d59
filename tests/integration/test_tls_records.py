"""TLS record sizes on the wire, through the real binary (tls_conn.c
he__tls_record_cap, tls.first_record): a client that reads the raw TCP
stream and decrypts it one record at a time, so it sees where each record
ends.

Checked here, for TLS 1.3 and 1.2: a connection's first response begins
with a record of at most tls.first_record bytes that holds the whole head
and the body's first bytes, followed by 16 KiB records; the next response
on a busy connection begins with a 16 KiB record; after a second idle the
first record is small again; a head longer than the limit goes whole in
one record; tls.first_record: 0 sends 16 KiB records from the start; a
reload changes the limit for the next response; a reader that stalls
past the idle second gets its whole body, with the write buffer and
without, with records sealed by hlsedge and by OpenSSL (then with a
write pending in OpenSSL). tls.write_buffer gathers a large
body's records into fewer write(2) calls (counted in /proc/PID/io), a
reload changes its size for the next body, and a small response on the
same connection after a buffered one is whole. Over HTTP/2 a turn's
frames are gathered the same way, many streams' playlists on one
connection are whole, and a drain sends a slow reader's gathered tail
before it closes. /stats counts the write buffers held: one while a full
socket holds up records, none on an idle connection. Bodies are checked
byte for byte. (kTLS, where the kernel cuts the records, closes the
head's record instead: test_ktls_vm.)
"""
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from he import Server, client_context, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import reload_and_wait, stats, wait_for  # noqa: E402
from he_h2 import RawH2  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-tlsrec-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=8)
SEG = "/1080p/seg_00000.ts"
FULL = 16384


def lib(path):
    with open(os.path.join(ROOT, path.lstrip("/")), "rb") as f:
        return f.read()


class RecordClient:
    """TLS over a raw socket: every record is fed to OpenSSL by itself, so
    the plaintext of each one is known. Records that carry no application
    data (TLS 1.3 session tickets) are skipped."""

    def __init__(self, port, maximum=None, rcvbuf=None):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.inb, self.outb = ssl.MemoryBIO(), ssl.MemoryBIO()
        ctx = client_context(maximum=maximum)
        ctx.set_alpn_protocols(["http/1.1"])
        self.tls = ctx.wrap_bio(self.inb, self.outb, server_hostname="hlsedge.test")
        self.raw = bytearray()
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                self.inb.write(self._record())
        self._flush()

    def _flush(self):
        out = self.outb.read()
        if out:
            self.sock.sendall(out)

    def _record(self):
        """The next whole record from the wire, header included."""
        while True:
            if len(self.raw) >= 5:
                n = 5 + int.from_bytes(self.raw[3:5], "big")
                if len(self.raw) >= n:
                    rec = bytes(self.raw[:n])
                    del self.raw[:n]
                    return rec
            d = self.sock.recv(65536)
            if not d:
                raise EOFError("connection closed")
            self.raw += d

    def data_record(self):
        """The plaintext of the next record that carries application data."""
        while True:
            self.inb.write(self._record())
            out = b""
            try:
                while True:
                    out += self.tls.read(65536)
            except ssl.SSLWantReadError:
                pass
            self._flush()
            if out:
                return out

    def ask(self, path, headers=""):
        self.tls.write(("GET %s HTTP/1.1\r\nHost: hlsedge.test\r\n%s\r\n" % (path, headers)).encode())
        self._flush()

    def get(self, path, headers="", asked=False):
        """The response to a GET, and the plaintext size of each record."""
        if not asked:
            self.ask(path, headers)
        sizes, buf = [], bytearray()
        while b"\r\n\r\n" not in buf:
            rec = self.data_record()
            sizes.append(len(rec))
            buf += rec
        head, body = bytes(buf).split(b"\r\n\r\n", 1)
        body = bytearray(body)
        clen = [int(v.split(b":")[1]) for v in head.split(b"\r\n") if v.lower().startswith(b"content-length:")][0]
        while len(body) < clen:
            rec = self.data_record()
            sizes.append(len(rec))
            body += rec
        return head, bytes(body), sizes

    def close(self):
        self.sock.close()


def reload_with(srv, old, new):
    """The server's configuration with old replaced by new, reloaded (the
    first reload: generation 2)."""
    with open(srv.conf) as f:
        conf = f.read()
    with open(srv.conf, "w") as f:
        f.write(conf.replace(old, new))
    reload_and_wait(srv, 2)


def server(first_record=None, extra="", write_buffer=None, tls_more=""):
    """Userspace TLS (ktls off, for a box that has it), with the keys set."""
    tls = "  ktls: false\n" + ("" if first_record is None else "  first_record: %s\n" % first_record)
    tls += ("" if write_buffer is None else "  write_buffer: %s\n" % write_buffer) + tls_more
    return Server(ROOT, tls=True, admin=True, tls_extra=tls, extra=extra)


def check_small_first(head, body, sizes, limit, what):
    expect(sizes[0] <= limit, "%s: first record %d bytes, at most %d" % (what, sizes[0], limit))
    expect(sizes[0] > len(head) + 4, "%s: the first record holds the whole head and body bytes: %r" %
           (what, sizes[:3]))
    expect_eq(sizes[1], FULL, "%s: the records after it are 16 KiB" % what)


def test_first_record_small_then_full():
    want = lib(SEG)
    part = "Range: bytes=0-299999\r\n"  # short enough to read well within the idle second
    for version, name in ((None, "TLS 1.3"), (ssl.TLSVersion.TLSv1_2, "TLS 1.2")):
        with server() as srv:
            c = RecordClient(srv.port, maximum=version)
            try:
                head, body, sizes = c.get(SEG, part)
                expect(body == want[:300000], "%s: the range byte-identical" % name)
                check_small_first(head, body, sizes, 1360, "%s, new connection" % name)
                expect(all(s == FULL for s in sizes[1:-1]), "%s: full records after the first: %r" %
                       (name, sorted(set(sizes[1:-1]))))
                head, body, sizes = c.get(SEG, part)
                expect(body == want[:300000], "%s: the second range byte-identical" % name)
                expect_eq(sizes[0], FULL, "%s: a busy connection's next response starts with a full record" % name)
                time.sleep(1.2)
                head, body, sizes = c.get(SEG, "Range: bytes=100-99999\r\n")
                expect(body == want[100:100000], "%s: the range after idle" % name)
                check_small_first(head, body, sizes, 1360, "%s, after a second idle" % name)
            finally:
                c.close()


def test_stalled_reader_resumes():
    """A reader that stops for longer than the idle second while the
    server's socket is full, then reads on: the whole file arrives.
    Records sealed by OpenSSL (tls.seal_records: false) without the write
    buffer leave the server's last write pending in OpenSSL, and its retry
    must get at least its length again: a small record there would be a
    fatal SSL_R_BAD_LENGTH, so every record stays 16 KiB. With the buffer,
    or with records sealed by hlsedge (nothing pending in OpenSSL: a
    sealed record's tail waits in the filter), the connection wrote nothing
    for a second, and the first record after the stall may be small, as
    after any idle second (docs/architecture.md, "The first record"); every
    other record is 16 KiB."""
    # TCP_NOTSENT_LOWAT refuses a write once 16 KiB wait unsent: the socket
    # fills inside a record (or inside the buffer's write)
    for seal in ("true", "false"):
        for wb in ("0", "64k"):
            what = "seal_records %s, write_buffer %s" % (seal, wb)
            with server(extra="send:\n  notsent_lowat: 16k\n", write_buffer=wb,
                        tls_more="  seal_records: %s\n" % seal) as srv:
                c = RecordClient(srv.port, rcvbuf=32768)
                try:
                    c.ask("/misc/big.ts")
                    time.sleep(1.5)
                    head, body, sizes = c.get("/misc/big.ts", asked=True)
                    expect(body == lib("/misc/big.ts"), "%s: 8 MiB byte-identical after the stall (%d bytes)"
                           % (what, len(body)))
                    expect(b" 200 " in head.split(b"\r\n")[0], "200")
                    short = [n for n in sizes[1:-1] if n != FULL]
                    expect(len(short) <= 1 and all(n <= 1360 for n in short),
                           "%s: 16 KiB records but the one after the stall: %r" % (what, sorted(set(sizes[1:-1]))))
                    if seal == "false" and wb == "0":
                        expect(not short, "%s: the retried write keeps its record: %r" % (what, short))
                    head, body, sizes = c.get("/master.m3u8")  # small, after a buffered body
                    expect(body == lib("/master.m3u8"), "%s: then a playlist, whole" % what)
                finally:
                    c.close()
                expect("bad length" not in srv.read_log().lower(), "no TLS error in the log")


def write_calls(srv):
    with open("/proc/%d/io" % srv.proc.pid) as f:
        return int([ln for ln in f if ln.startswith("syscw:")][0].split()[1])


def fetch_counting_writes(srv, path, version="--http1.1"):
    """write(2) calls (every thread of the server) during one curl GET,
    and the body."""
    out = os.path.join(TMP, "wb.out")
    before = write_calls(srv)
    subprocess.run(["curl", "-sf", version, "--max-time", "30", "-o", out] + srv.curl_args() +
                   [srv.url(path)], check=True)
    after = write_calls(srv)
    with open(out, "rb") as f:
        return after - before, f.read()


def test_write_buffer_gathers_records():
    """8 MiB is 512 records. One write(2) each without the buffer; with
    it, a write per buffer's worth (plus partial ones when the socket
    fills). A reload changes the size for the next body."""
    want = lib("/misc/big.ts")
    records = len(want) // FULL
    with server(write_buffer="0") as srv:
        fetch_counting_writes(srv, "/master.m3u8")  # a handshake's own writes out of the way
        per_record, body = fetch_counting_writes(srv, "/misc/big.ts")
        expect(body == want, "write_buffer 0: 8 MiB byte-identical")
        expect(per_record >= records, "write_buffer 0: a write per record: %d writes, %d records" %
               (per_record, records))
        reload_with(srv, "  write_buffer: 0\n", "  write_buffer: 256k\n")
        fetch_counting_writes(srv, "/master.m3u8")
        gathered, body = fetch_counting_writes(srv, "/misc/big.ts")
        expect(body == want, "write_buffer 256k: 8 MiB byte-identical")
        expect(gathered * 3 <= per_record, "write_buffer 256k after a reload: %d writes against %d" %
               (gathered, per_record))
        _, body = fetch_counting_writes(srv, "/master.m3u8")
        expect(body == lib("/master.m3u8"), "a playlist (below the buffer's size) is whole")
        expect("error" not in srv.read_log().lower(), "no error in the log")


def test_h2_frames_gathered():
    """HTTP/2: a turn's frames (DATA of 16 KiB less their 9-byte heads,
    one record each) leave in writes of the buffer's size, and the
    playlists of many streams on one connection as well. A record a
    write without the buffer."""
    want = lib("/misc/big.ts")
    records = len(want) // FULL
    pls = ["/%s/index.m3u8" % r for r in ("288p", "360p", "576p", "720p", "1080p")] * 8
    with server(write_buffer="0") as srv:
        fetch_counting_writes(srv, "/master.m3u8", "--http2")
        per_record, body = fetch_counting_writes(srv, "/misc/big.ts", "--http2")
        expect(body == want, "h2, write_buffer 0: 8 MiB byte-identical")
        expect(per_record >= records, "h2, write_buffer 0: a write per record: %d writes, %d records" %
               (per_record, records))
        reload_with(srv, "  write_buffer: 0\n", "  write_buffer: 64k\n")
        fetch_counting_writes(srv, "/master.m3u8", "--http2")
        gathered, body = fetch_counting_writes(srv, "/misc/big.ts", "--http2")
        expect(body == want, "h2, write_buffer 64k: 8 MiB byte-identical")
        expect(gathered * 3 <= per_record, "h2, write_buffer 64k: %d writes against %d" % (gathered, per_record))
        # 40 streams at once on one connection, each a playlist in memory
        cl = RawH2(srv.port, tls=True)
        try:
            sids = [cl.get(p) for p in pls]
            cl.read(lambda: all(s in cl.ended for s in sids), wait=20)
            for sid, p in zip(sids, pls):
                expect_eq((cl.status.get(sid), bytes(cl.body[sid])), ("200", lib(p)), "stream %d: %s" % (sid, p))
        finally:
            cl.close()
        expect("error" not in srv.read_log().lower(), "no error in the log")


def test_h2_drain_sends_gathered_tail():
    """SIGTERM while a slow HTTP/2 reader is mid-stream: the stream's last
    frames may still be gathered records when the session ends, and they
    go before the close; the body arrives whole, then GOAWAY(NO_ERROR) and
    the close, and the process exits 0."""
    for wb in ("64k", "1m"):
        with server(extra="send:\n  notsent_lowat: 16k\ntimeouts:\n  drain: 20s\n", write_buffer=wb) as srv:
            cl = RawH2(srv.port, rcvbuf=32768, timeout=30, tls=True)
            sid = cl.get("/misc/big.ts")
            cl.read(lambda: len(cl.body[sid]) > 256 * 1024, wait=10, delay=0.02)
            expect(sid not in cl.ended, "write_buffer %s: the stream is under way" % wb)
            srv.signal(signal.SIGTERM)
            cl.read(lambda: False, wait=40, delay=0.005, chunk=16384)
            expect(bytes(cl.body[sid]) == lib("/misc/big.ts"), "write_buffer %s: 8 MiB byte-identical (%d bytes)" %
                   (wb, len(cl.body[sid])))
            expect_eq(cl.goaway, (sid, 0), "write_buffer %s: GOAWAY(NO_ERROR) naming the stream" % wb)
            expect(cl.closed, "write_buffer %s: then the close" % wb)
            expect_eq(srv.proc.wait(15), 0, "write_buffer %s: exit status after the drain" % wb)
            cl.close()


def buffers_held(srv, n, what):
    """Waits until /stats says n write buffers are held; how many were
    taken by then."""
    def now():
        t = stats(srv)["tls"]
        # a tuple: wait_for takes a falsy answer for "not yet", and 0 taken is one
        return (t["write_buffers_taken"],) if t["write_buffers_held"] == n else None
    return wait_for(now, 5, what)[0]


def test_idle_connections_hold_no_write_buffer():
    """The write buffer is a connection's only while records wait or a
    large body is under way (/stats tls.write_buffers_held). With a 4 KiB
    buffer every DATA record fills it and leaves at once, so an HTTP/2
    turn ends with the buffer empty, and it must go all the same; checked
    after a segment and after many playlists, over HTTP/2 and HTTP/1.1,
    while the connection stays open."""
    for wb in ("4k", "64k"):
        with server(extra="send:\n  notsent_lowat: 16k\n", write_buffer=wb) as srv:
            cl = RawH2(srv.port, rcvbuf=32768, timeout=30, tls=True)
            try:
                sid = cl.get("/misc/big.ts")
                cl.read(lambda: len(cl.body[sid]) > 256 * 1024, wait=10, delay=0.02)
                expect(sid not in cl.ended, "h2, write_buffer %s: the stream is under way" % wb)
                buffers_held(srv, 1, "h2, write_buffer %s: a buffer held while a full socket holds up records" % wb)
                cl.read(lambda: sid in cl.ended, wait=30, chunk=262144)
                expect(bytes(cl.body[sid]) == lib("/misc/big.ts"), "h2, write_buffer %s: 8 MiB whole" % wb)
            finally:
                cl.close()
            cl = RawH2(srv.port, timeout=30, tls=True)  # a reader that keeps up
            try:
                sid = cl.get("/misc/big.ts")
                cl.read(lambda: sid in cl.ended, wait=30, chunk=262144)
                expect(bytes(cl.body[sid]) == lib("/misc/big.ts"), "h2, write_buffer %s: 8 MiB whole" % wb)
                buffers_held(srv, 0, "h2, write_buffer %s: no buffer held once the segment went" % wb)
                pls = ["/%s/index.m3u8" % r for r in ("288p", "360p", "576p", "720p", "1080p")] * 4
                sids = [cl.get(p) for p in pls]
                cl.read(lambda: all(s in cl.ended for s in sids), wait=20)
                expect(all(bytes(cl.body[s]) == lib(p) for s, p in zip(sids, pls)),
                       "h2, write_buffer %s: 20 playlists whole" % wb)
                taken = buffers_held(srv, 0, "h2, write_buffer %s: no buffer held on the idle connection" % wb)
                expect(taken >= 2, "h2, write_buffer %s: buffers were taken: %d" % (wb, taken))
                expect(not cl.closed, "h2, write_buffer %s: the connection is still open" % wb)
            finally:
                cl.close()
            c = RecordClient(srv.port)
            try:
                for path in (SEG, "/master.m3u8", SEG):
                    _, body = c.get(path)[:2]
                    expect(body == lib(path), "h1, write_buffer %s: %s whole" % (wb, path))
                before = taken
                taken = buffers_held(srv, 0, "h1, write_buffer %s: no buffer held on the idle connection" % wb)
                expect(taken >= before + 2, "h1, write_buffer %s: a buffer for each segment: %d -> %d" %
                       (wb, before, taken))
            finally:
                c.close()


def test_long_head_goes_whole():
    """A head longer than the limit is one record, and nothing is lost."""
    with server(first_record=200) as srv:
        c = RecordClient(srv.port)
        try:
            head, body, sizes = c.get(SEG)
            expect(len(head) + 4 > 200, "the head (%d bytes) is longer than the limit" % (len(head) + 4))
            expect_eq(sizes[0], len(head) + 4, "the head alone in the first record")
            expect_eq(sizes[1], FULL, "then full records")
            expect(body == lib(SEG), "segment byte-identical")
        finally:
            c.close()


def test_off_and_reload():
    with server(first_record=0) as srv:
        c = RecordClient(srv.port)
        try:
            head, body, sizes = c.get(SEG)
            expect_eq(sizes[0], FULL, "tls.first_record: 0 starts with a full record")
            expect(body == lib(SEG), "segment byte-identical")
        finally:
            c.close()
        reload_with(srv, "  first_record: 0\n", "  first_record: 4k\n")
        c = RecordClient(srv.port)
        try:
            head, body, sizes = c.get(SEG)
            check_small_first(head, body, sizes, 4096, "after a reload to 4k")
            expect(sizes[0] > 1360, "the new limit, not the default: %d" % sizes[0])
        finally:
            c.close()


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, sys.argv[1:] or None))
