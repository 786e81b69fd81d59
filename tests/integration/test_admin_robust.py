"""The admin listener and the control thread under abuse and odd input,
through the real binary:

  - a client that pipelines 2 MiB of requests and reads nothing: the
    server's memory stays bounded, /healthz keeps answering on another
    connection, and once the client reads, every answer arrives whole and
    in order.
Every wait is bounded."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Conn, Server, connect, expect, expect_eq, free_port, make_library, run_main  # noqa: E402
from he_admin import admin_get, port_refuses, reload_and_wait, stats, wait_for  # noqa: E402
from origin import Origin  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-admrob-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def responses(buf):
    """[(status, body)] of the whole HTTP/1.1 responses in buf, and the
    bytes left over (a response cut short)."""
    out, pos = [], 0
    while True:
        end = buf.find(b"\r\n\r\n", pos)
        if end < 0:
            break
        head = buf[pos:end].decode("latin1")
        m = re.search(r"\r\ncontent-length: *(\d+)", head, re.I)
        n = int(m.group(1)) if m else 0
        if end + 4 + n > len(buf):
            break
        out.append((int(head[9:12]), buf[end + 4:end + 4 + n]))
        pos = end + 4 + n
    return out, buf[pos:]


def recv_all(sock, timeout=30):
    sock.settimeout(timeout)
    got = []
    try:
        while True:
            d = sock.recv(1 << 20)
            if not d:
                break
            got.append(d)
    except (ConnectionError, socket.timeout):
        pass
    return b"".join(got)


# ---------------------------------------------------------------- backpressure

PIPELINE = [("/healthz", 200, b"ok\n"), ("/metrics", 200, b"# HELP"), ("/healthz", 200, b"ok\n"),
            ("/nope", 404, b"not found\n")]


def test_pipelined_requests_without_reading_stay_bounded():
    with Server(ROOT, admin=True) as srv:
        pid = srv.proc.pid
        metrics_len = len(admin_get(srv, "/metrics").body)
        base = rss_kib(pid)
        reqs = b"".join(b"GET %s HTTP/1.1\r\nHost: a\r\n\r\n" % p.encode() for p, _, _ in PIPELINE)
        rounds = (2 << 20) // len(reqs)
        s = connect(srv.admin_port, tls=False, rcvbuf=16384)
        sender = threading.Thread(target=lambda: s.sendall(reqs * rounds), daemon=True)
        sender.start()
        # Let the server do all it will while the client reads nothing, until
        # RSS settles (without a bound it grows by every answer it makes).
        seen, deadline = [base], time.time() + 10
        while time.time() < deadline and (len(seen) < 11 or seen[-1] - seen[-11] > 1024):
            time.sleep(0.1)
            seen.append(rss_kib(pid))
        peak = max(seen)
        t0 = time.time()
        expect_eq(admin_get(srv, "/healthz").status, 200, "/healthz while a client holds answers")
        expect(time.time() - t0 < 2, "/healthz answered in %.2fs" % (time.time() - t0))
        grown = (peak - base) * 1024
        unbounded = rounds * metrics_len
        print("  RSS %d KiB -> %d KiB (answers in all: %d MiB)" % (base, peak, unbounded >> 20))
        expect(grown < 32 << 20, "RSS grew by %d MiB while the client read nothing" % (grown >> 20))
        # Now read everything: each answer whole, in the order asked.
        s.settimeout(30)
        want, buf, got = rounds * len(PIPELINE), b"", 0
        deadline = time.time() + 60
        while got < want and time.time() < deadline:
            d = s.recv(1 << 20)
            if not d:
                break
            buf += d
            rs, buf = responses(buf)
            for status, body in rs:
                path, st, prefix = PIPELINE[got % len(PIPELINE)]
                if status != st or not body.startswith(prefix):
                    raise AssertionError("answer %d (%s): %d %r" % (got, path, status, body[:40]))
                got += 1
        sender.join(10)
        expect_eq(got, want, "answers received")
        expect_eq(buf, b"", "nothing after the last answer")
        s.close()


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, sys.argv[1:] or None))
