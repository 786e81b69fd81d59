"""Bodies' turns in slices (server/net/worker_turns.c, ring.slice_us): once
a batch of completions has run for the slice, the POLLOUTs of bodies under
way wait in a queue while the worker takes new requests, then go on in
order. With a one-microsecond slice nearly every batch is cut, so these
tests put many bodies and new requests through the queue: every response
must arrive whole, clients that vanish while their body's turn waits must
not take the worker down (CI runs this under ASan too), and /stats and
/metrics must count what the queue did; bodies on userspace TLS keep
their order. The timing gain is a benchmark's
business (docs/performance.md, "Turns in slices")."""

import os
import socket
import struct
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, connect, expect, expect_eq, make_library, run_main, sha256  # noqa: E402
from he_admin import metric_sum, metrics_text, parse_metrics, reload_and_wait, stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-turns-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=4)
BIG = open(os.path.join(ROOT, "misc", "big.ts"), "rb").read()
PLAYLIST = open(os.path.join(ROOT, "360p", "index.m3u8"), "rb").read()
SEGMENT = open(os.path.join(ROOT, "1080p", "seg_00000.ts"), "rb").read()


def started_line(srv):
    return wait_for(lambda: [ln for ln in srv.read_log().splitlines() if "connection slots" in ln],
                    10, "the worker's start line in the log")[0]


def load(srv, bodies=16, rounds=3, vanish=4):
    """bodies clients fetch the 4 MiB file through small receive buffers
    (their sockets fill, so each body takes many turns) while 8 more ask
    for playlists and segments, and vanish clients reset their connection
    halfway through a body. Returns the errors seen."""
    errors = []

    def big(k):
        try:
            for i in range(rounds):
                c = srv.conn(rcvbuf=65536)
                r = c.request("GET", "/misc/big.ts")
                if r.status != 200 or sha256(r.body) != sha256(BIG):
                    errors.append("body %d round %d: %d, %d bytes" % (k, i, r.status, len(r.body)))
                c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("body %d: %r" % (k, e))

    def small(k):
        try:
            c = srv.conn()
            for i in range(30):
                path, want = ("/1080p/seg_00000.ts", SEGMENT) if i % 3 == 0 else ("/360p/index.m3u8", PLAYLIST)
                r = c.request("GET", path)
                if r.status != 200 or r.body != want:
                    errors.append("client %d request %d: %d, %d bytes" % (k, i, r.status, len(r.body)))
            c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("client %d: %r" % (k, e))

    def gone(k):
        try:
            for _ in range(rounds):
                s = connect(srv.port, rcvbuf=32768, tls=srv.tls)
                s.sendall(b"GET /misc/big.ts HTTP/1.1\r\nHost: x\r\n\r\n")
                got = 0
                while got < len(BIG) // 2:
                    d = s.recv(65536)
                    if not d:
                        break
                    got += len(d)
                # a reset, not a FIN: the server's next send fails at once
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("vanishing client %d: %r" % (k, e))

    threads = [threading.Thread(target=big, args=(k,)) for k in range(bodies)]
    threads += [threading.Thread(target=small, args=(k,)) for k in range(8)]
    threads += [threading.Thread(target=gone, args=(k,)) for k in range(vanish)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    expect(not any(t.is_alive() for t in threads), "a client hung")
    return errors


def test_tiny_slices_every_body_whole():
    with Server(ROOT, admin=True, extra="ring:\n  slice_us: 1\n") as srv:
        expect("bodies' turns yield to new requests every 1 us" in started_line(srv), started_line(srv))
        errors = load(srv)
        expect(not errors, "; ".join(errors[:5]))
        send = stats(srv)["send"]
        expect(send["turns_deferred"] > 0, "bodies' turns waited behind new input: %r" % send)
        expect(send["slices_spent"] > 0, "batches were cut: %r" % send)
        expect(send["slices_spent"] <= send["turns_deferred"], "a cut defers a turn at least: %r" % send)
        samples = parse_metrics(metrics_text(srv))
        expect(metric_sum(samples, "hlsedge_turns_deferred_total") >= send["turns_deferred"],
               "/metrics counts the deferred turns")
        expect(metric_sum(samples, "hlsedge_slices_spent_total") >= send["slices_spent"],
               "/metrics counts the cut batches")
        # the vanished clients' connections went, the worker is whole
        wait_for(lambda: stats(srv)["connections"]["active"] <= 1, 10, "the connections to close")
        r = srv.conn().request("GET", "/360p/index.m3u8")
        expect_eq(r.body, PLAYLIST, "a request after the load")


def test_off_runs_batches_out():
    with Server(ROOT, admin=True, extra="ring:\n  slice_us: 0\n") as srv:
        expect("each batch runs out (ring.slice_us: 0)" in started_line(srv), started_line(srv))
        errors = load(srv, bodies=8, rounds=2, vanish=2)
        expect(not errors, "; ".join(errors[:5]))
        send = stats(srv)["send"]
        expect_eq(send["turns_deferred"], 0, "no turn waits with slices off")
        expect_eq(send["slices_spent"], 0, "no batch is cut with slices off")


def test_userspace_tls_keeps_its_order():
    """Bodies on SSL_write run in their batch as before: in slices they
    cost bytes per CPU-second, and their first byte did not need them."""
    with Server(ROOT, admin=True, tls=True, tls_extra="  ktls: false\n", extra="ring:\n  slice_us: 1\n") as srv:
        errors = load(srv, bodies=8, rounds=2, vanish=2)
        expect(not errors, "; ".join(errors[:5]))
        st = stats(srv)
        expect(st["tls"]["connections_userspace"] > 0, "the bodies went by SSL_write: %r" % st["tls"])
        expect_eq(st["send"]["turns_deferred"], 0, "no TLS body's turn waits")


def test_default_and_live_reload():
    """The default is a 4 ms slice; ring.slice_us is live: a reload turns
    it off and on again in the running workers, and says so."""
    with Server(ROOT, admin=True) as srv:
        expect("bodies' turns yield to new requests every 4000 us" in started_line(srv), started_line(srv))
        with open(srv.conf) as f:
            text = f.read()
        with open(srv.conf, "w") as f:
            f.write(text + "\nring:\n  slice_us: 0\n")
        reload_and_wait(srv, 2)
        log = srv.read_log()
        expect("reload: workers now wait" in log and "each batch runs out (ring.slice_us: 0)" in log,
               "the reload logs the new slice: " + log[-1500:])
        expect_eq(stats(srv)["config"]["server_generations"], 1, "no new workers")
        with open(srv.conf, "w") as f:
            f.write(text + "\nring:\n  slice_us: 1\n")
        reload_and_wait(srv, 3)
        expect("bodies' turns yield to new requests every 1 us" in srv.read_log(), srv.read_log()[-1500:])
        errors = load(srv, bodies=8, rounds=2, vanish=2)
        expect(not errors, "; ".join(errors[:5]))
        expect(stats(srv)["send"]["turns_deferred"] > 0, "the reloaded slice defers turns")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
