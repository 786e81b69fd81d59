#!/usr/bin/env python3
"""What the server's CPU spent per GB moved, by kind of work, from the perf
recordings of `tests/bench/matrix.py --perf` (docs/performance.md, "The
line-rate cells by kind of work").

    python3 tests/bench/cpu_kinds.py var/bench/matrix-.../perf [CELL]

Each sample on the server's CPU is put in one kind, from its stack:
  interrupts off   the sample fell while interrupts were off and was
                   delivered when they came on again (a guest's clock
                   interrupt cannot land before): the entry of an
                   interrupt, mostly the cross-CPU ones, as the guest pays
                   it, and the short sections that turn interrupts off
  net receive      a network receive (net_rx_action, a socket backlog):
                   the client's ACKs taken in, acknowledged data freed, and
                   what they let the socket transmit
  other softirq    timers and the rest of the softirqs
  server kernel    the server's own system calls
  server user      the server's own code in user space
  idle, other      no task, or another process
and divided by the GB the client received in that run. A kind that is the
same per GB for every server is the kernel's floor on this machine; the
server kinds are what a server's own choices cost.
"""
import collections
import json
import os
import statistics
import sys

from cpu_split import samples  # the one reader of perf script's output

KINDS = ("interrupts off", "net receive", "other softirq", "server kernel", "server user", "idle", "other")
RX = ("net_rx_action", "__release_sock")
KERNEL_MIN = 0xffff800000000000


def kind(pid, frames, server_pids):
    syms = [s for _, s in frames]
    if syms and "irq_enable" in syms[0]:  # the enable, or the one in a restore
        return "interrupts off"
    if any(s in RX for s in syms):
        return "net receive"
    if "handle_softirqs" in syms:
        return "other softirq"
    if pid in server_pids:
        return "server kernel" if frames and frames[0][0] >= KERNEL_MIN else "server user"
    return "idle" if pid == 0 else "other"


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    d, want = sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None
    per = collections.defaultdict(list)  # (cell, server) -> [{kind: ms per GB}]
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json"):
            continue
        meta = json.load(open(os.path.join(d, name)))
        if want and meta["cell"] != want:
            continue
        pids, ns = set(meta["server_pids"]), collections.Counter()
        for pid, _, _, period, frames in samples(os.path.join(d, name[:-5] + ".data"), meta["server_cpu"]):
            ns[kind(pid, frames, pids)] += period
        ms_per_gb = {k: ns[k] / 1e6 / (meta["bytes"] / 1e9) for k in KINDS}
        per[(meta["cell"], meta["server"])].append(ms_per_gb)
        print("%s %s run %d: %s" % (meta["cell"], meta["server"], meta["run"],
                                   ", ".join("%s %.0f" % (k, ms_per_gb[k]) for k in KINDS)),
              file=sys.stderr, flush=True)
    print("ms of the server's CPU per GB, medians of the runs\n")
    print("| cell | server | " + " | ".join(KINDS) + " | busy total |")
    print("| --- | --- |" + " --- |" * (len(KINDS) + 1))
    for (cell, server), rs in sorted(per.items()):
        med = {k: statistics.median(r[k] for r in rs) for k in KINDS}
        busy = statistics.median(sum(r[k] for k in KINDS if k != "idle") for r in rs)
        print("| %s | %s | %s | %.0f |" % (cell, server, " | ".join("%.0f" % med[k] for k in KINDS), busy))


if __name__ == "__main__":
    main()
