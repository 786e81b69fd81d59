"""How a worker waits for its ring (server/net/worker.c he_worker_enter):
with the kernel's io_uring min timeout (Linux 6.12) a busy worker waits for
ring.batch completions or ring.batch_wait_us, whichever comes first. What
must hold whatever the timing: a lone request on a connection while others
sit idle is answered without waiting for completions that will never come
(each such wait is bounded by batch_wait_us, not by the one-second outer
timeout), many connections at once all get their exact bytes, and the log
and /stats say which way the worker waits. Without the feature (or with
batch_wait_us: 0) a worker wakes at each first completion."""

import os
import re
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import reload_and_wait, stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-ring-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
PLAYLIST = open(os.path.join(ROOT, "360p", "index.m3u8"), "rb").read()
SEGMENT = open(os.path.join(ROOT, "360p", "seg_00001.ts"), "rb").read()


def kernel_has_min_timeout():
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(m.group(1)), int(m.group(2))) >= (6, 12)


def waits_line(srv):
    """The worker's start line. The server logs it after the worker is
    ready, which can be after the listener answers a connect (slower still
    under the sanitizers), so wait for it."""
    return wait_for(lambda: [ln for ln in srv.read_log().splitlines() if "connection slots" in ln],
                    10, "the worker's start line in the log")[0]


def sequential(srv, n):
    """n requests one after the other on one connection, with two more
    open and idle: the worker has three connections, so it waits for three
    completions where two will come (the response's send and the next
    request's recv), and each wait ends at batch_wait_us."""
    idle = [srv.conn(), srv.conn()]
    c = srv.conn()
    t0 = time.time()
    for i in range(n):
        r = c.request("GET", "/360p/index.m3u8")
        expect_eq(r.status, 200, "request %d" % i)
        expect_eq(r.body, PLAYLIST, "request %d body" % i)
    took = time.time() - t0
    c.close()
    for i in idle:
        i.close()
    return took


def test_batched_by_default():
    with Server(ROOT, admin=True) as srv:
        feat = stats(srv)["features"]["io_uring"]
        expect("min_timeout" in feat, "/stats lists min_timeout")
        if kernel_has_min_timeout():
            expect(feat["min_timeout"], "a 6.12+ kernel has the min timeout")
        line = waits_line(srv)  # the features line is logged before it
        if feat["min_timeout"]:
            expect("waits for up to 64 completions or 200 us" in line, line)
            expect("min_timeout=1" in srv.read_log(), "the features line says min_timeout=1")
        else:
            expect("waits for each completion (no min_timeout" in line, line)
        # 300 waits that each end at batch_wait_us: well under a second in
        # all; had they waited for the outer timeout, 300 seconds
        took = sequential(srv, 300)
        expect(took < 30, "300 sequential requests took %.1f s: a wait outlived batch_wait_us" % took)


def test_many_connections_get_their_bytes():
    with Server(ROOT, extra="ring:\n  batch: 8\n  batch_wait_us: 2000\n") as srv:
        errors = []

        def client(k):
            try:
                c = srv.conn()
                for i in range(20):
                    path, want = ("/360p/seg_00001.ts", SEGMENT) if (i + k) % 3 == 0 else \
                        ("/360p/index.m3u8", PLAYLIST)
                    r = c.request("GET", path)
                    if r.status != 200 or r.body != want:
                        errors.append("client %d request %d: %d, %d bytes" % (k, i, r.status, len(r.body)))
                c.close()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append("client %d: %r" % (k, e))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        expect(not any(t.is_alive() for t in threads), "a client hung")
        expect(not errors, "; ".join(errors[:5]))
        line = waits_line(srv)  # the features line is logged before it
        if "min_timeout=1" in srv.read_log():
            expect("waits for up to 8 completions or 2000 us" in line, line)
        # a long batch wait with an idle neighbour still ends in time
        took = sequential(srv, 50)
        expect(took < 20, "50 sequential requests took %.1f s" % took)


def test_unbatched_when_off():
    with Server(ROOT, extra="ring:\n  batch_wait_us: 0\n") as srv:
        line = waits_line(srv)  # the features line is logged before it
        if "min_timeout=1" in srv.read_log():
            expect("waits for each completion (ring.batch_wait_us: 0)" in line, line)
        else:
            expect("waits for each completion (no min_timeout)" in line, line)
        sequential(srv, 50)


def test_unbatched_without_the_feature():
    with Server(ROOT, admin=True, extra="features:\n  disable: [min_timeout]\n") as srv:
        expect_eq(stats(srv)["features"]["io_uring"]["min_timeout"], False, "disabled min_timeout")
        line = waits_line(srv)  # the features line is logged before it
        expect("min_timeout=0" in srv.read_log(), "the features line says min_timeout=0")
        expect("waits for each completion (no min_timeout" in line, line)
        sequential(srv, 50)


def test_live_reload():
    """ring.* are live keys: a reload changes how the running workers wait,
    without new workers. With a 10 ms batch wait, each request next to
    idle connections waits it out at least once, which puts a floor under
    100 sequential requests; with 0 they are not held."""
    with Server(ROOT, admin=True, extra="ring:\n  batch_wait_us: 10000\n") as srv:
        line = waits_line(srv)
        if "min_timeout=1" not in srv.read_log():
            print("skip: the kernel has no io_uring min timeout")
            return
        expect("waits for up to 64 completions or 10000 us" in line, line)
        held = sequential(srv, 100)
        expect(held >= 0.9, "100 requests with a 10 ms batch wait took %.2f s" % held)
        with open(srv.conf) as f:
            text = f.read()
        with open(srv.conf, "w") as f:
            f.write(text.replace("batch_wait_us: 10000", "batch_wait_us: 0"))
        reload_and_wait(srv, 2)
        expect("generation 2 applied (live, same workers)" in srv.read_log(), srv.read_log()[-1500:])
        expect("reload: workers now wait for each completion (ring.batch_wait_us: 0)" in srv.read_log(),
               "the reload logs the new wait: " + srv.read_log()[-1500:])
        expect_eq(stats(srv)["config"]["server_generations"], 1, "no new workers")
        free = sequential(srv, 100)
        expect(free < held / 2, "after the reload 100 requests took %.2f s (%.2f before)" % (free, held))


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
