"""Connection steering: with one SO_REUSEPORT listener per worker and the
CPU-steering BPF program, a connection is accepted by the worker pinned to
the CPU that received it. On loopback the packet is received on the CPU
the client sent it from, so a client pinned to CPU k must be served by the
worker on CPU k. Without the program (features.disable: [reuseport_cbpf])
the kernel's hash spreads connections instead."""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-steer-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
N = 40


def accepted_by_cpu(srv):
    return {w["cpu"]: w["connections"]["accepted"] for w in stats(srv)["workers"]}


def connect_from(cpu, srv, n):
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        for _ in range(n):
            c = srv.conn()
            expect_eq(c.request("GET", "/master.m3u8").status, 200)
            c.close()
    finally:
        os.sched_setaffinity(0, old)


def test_connections_stay_on_the_receiving_cpu():
    if len(os.sched_getaffinity(0)) < 2:
        print("  (needs 2 CPUs; skipped)")
        return
    cpus = sorted(os.sched_getaffinity(0))[:2]
    with Server(ROOT, workers=2, admin=True, extra="cpus: [%d, %d]\n" % tuple(cpus)) as srv:
        expect(stats(srv)["features"]["reuseport_cbpf"], "steering program available")
        base = accepted_by_cpu(srv)  # the harness's start-up probe counts too
        for i, cpu in enumerate(cpus):
            connect_from(cpu, srv, N)
            want = {c: base[c] + (N if j <= i else 0) for j, c in enumerate(cpus)}
            wait_for(lambda: accepted_by_cpu(srv) == want, what="accepted per CPU %r" % want)


def test_without_program_both_workers_serve():
    if len(os.sched_getaffinity(0)) < 2:
        return
    cpus = sorted(os.sched_getaffinity(0))[:2]
    with Server(ROOT, workers=2, admin=True, extra="cpus: [%d, %d]\n" % tuple(cpus),
                disable_features=["reuseport_cbpf"]) as srv:
        expect(not stats(srv)["features"]["reuseport_cbpf"], "program disabled")
        base = accepted_by_cpu(srv)
        connect_from(cpus[0], srv, 4 * N)

        def delta():
            a = accepted_by_cpu(srv)
            d = {c: a[c] - base[c] for c in a}
            return d if sum(d.values()) == 4 * N else None

        acc = wait_for(delta, what="all connections counted")
        # a hash over 160 different source ports puts some on each worker
        expect(all(v > 0 for v in acc.values()), "both workers accepted: %r" % acc)


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
