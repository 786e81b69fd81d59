#!/usr/bin/env python3
"""Whose work each CPU did, from the perf recordings of
`tests/bench/matrix.py --perf` (docs/performance.md, "Whose work the client
CPU does").

    python3 tests/bench/cpu_split.py var/bench/matrix-.../perf

Over loopback neither CPU does only its own process's work. A data segment
the server transmits is received (tcp_v4_rcv and on, into the client's
socket) in the server's softirq, right after its transmit, unless the
client holds its socket at that moment; the client's ACKs come back in the
client's softirq, where the server's socket frees what they acknowledge
and transmits more of its window (tcp_ack, tcp_clean_rtx_queue,
tcp_write_xmit). So "per server CPU-second" charges a server for some of
the client's receiving and not for some of its own sending, and how much of
each depends on how the server cuts its sends.

This reads each sample's stack from the leaf up. Inside a network receive
(net_rx_action or a socket backlog being run), the frames below it say
which side's TCP work it is: the data receiver's (queueing data, waking the
reader, sending its ACK) or the data sender's (taking ACKs in, freeing
acknowledged data, transmitting more). Receive work that is neither yet
(IP, the socket lookup) is split between the two in proportion. Outside a
receive a sample is the work of the process it ran in. In the segment
cells the data sender is the server: "server work" below is its own
process's samples plus the sender's share of every CPU's receives.

Prints per run: the server's work in CPU-seconds, how much of it ran on the
client's CPU, the client's receive work that ran on the server's CPU, and
GB per server-work CPU-second next to the matrix's GB per server CPU-second.
"""
import collections
import json
import os
import statistics
import subprocess
import sys

RX_ENTRY = ("net_rx_action", "__release_sock", "tcp_v4_do_rcv")
# frames of the data sender's side of a receive: an ACK coming in
SENDER = {"tcp_ack", "tcp_clean_rtx_queue", "tcp_write_xmit", "tcp_data_snd_check", "tcp_rearm_rto",
          "tcp_rack_update_reo_wnd", "tcp_ack_update_rtt", "tcp_rate_gen", "tcp_newly_delivered",
          "__tcp_push_pending_frames", "tcp_cong_control", "bbr_main", "tcp_sacktag_write_queue"}
# frames of the data receiver's side: data queued, the reader woken, its ACK
RECEIVER = {"tcp_data_queue", "tcp_queue_rcv", "tcp_event_data_recv", "sock_def_readable",
            "__tcp_ack_snd_check", "tcp_send_ack", "__tcp_send_ack", "tcp_rcv_space_adjust",
            "tcp_ofo_queue", "tcp_data_ready", "skb_try_coalesce", "tcp_try_coalesce",
            "tcp_send_delayed_ack", "tcp_add_backlog"}


def samples(data, cpu=None):
    """Yields (pid, comm, cpu, period_ns, frames leaf first as (ip, sym)),
    of every CPU or only of cpu."""
    only = ["--cpu", str(cpu)] if cpu is not None else []
    p = subprocess.Popen(["perf", "script", "-i", data] + only + ["-F", "comm,pid,cpu,period,ip,sym"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    head, frames = None, []
    for line in p.stdout:
        if not line.strip():
            if head:
                yield head + (frames,)
            head, frames = None, []
        elif line[0] == "\t":  # a frame: "ip sym"
            parts = line.split(None, 1)
            try:
                ip = int(parts[0], 16)
            except ValueError:
                ip = 0
            frames.append((ip, parts[1].strip() if len(parts) > 1 else parts[0]))
        else:
            # "comm pid [cpu] period", comm may hold spaces
            left, rest = line.rsplit("[", 1)
            cpu_s, period_s = rest.split("]", 1)
            comm, pid = left.rsplit(None, 1)
            head = (int(pid), comm.strip(), int(cpu_s), int(period_s.split()[0]))
    if head:
        yield head + (frames,)
    p.wait()


def split(data, meta):
    server_pids = set(meta["server_pids"])
    client_cpu, server_cpu = meta["client_cpu"], meta["server_cpu"]
    ns = collections.Counter()  # (who, cpu) -> ns; who: server, client, sender, receiver, rx, idle, other
    for pid, comm, cpu, period, frames in samples(data):
        frames = [sym for _, sym in frames]
        rx = next((i for i, f in enumerate(frames) if f in RX_ENTRY), None)
        if rx is not None:
            below = set(frames[:rx])
            s, r = bool(below & SENDER), bool(below & RECEIVER)
            who = "sender" if s and not r else "receiver" if r and not s else "rx"
        elif pid in server_pids:
            who = "server"
        elif comm.startswith(("wrk", "hlsedge-loadge")):
            who = "client"
        elif pid == 0:
            who = "idle"
        else:
            who = "other"
        ns[(who, cpu)] += period
    out = {}
    for cpu in (server_cpu, client_cpu):
        snd, rcv, rx = ns[("sender", cpu)], ns[("receiver", cpu)], ns[("rx", cpu)]
        part = snd / (snd + rcv) if snd + rcv else 0.5
        out[cpu] = {"own": ns[("server", cpu)], "sender": snd + rx * part, "receiver": rcv + rx * (1 - part),
                    "client": ns[("client", cpu)], "idle": ns[("idle", cpu)], "other": ns[("other", cpu)]}
    server_work = sum(out[c]["own"] + out[c]["sender"] for c in out) / 1e9
    return {"server_work_s": server_work,
            "server_work_on_client_cpu_s": out[client_cpu]["sender"] / 1e9,
            "client_rx_on_server_cpu_s": out[server_cpu]["receiver"] / 1e9,
            "gb_per_server_work_s": meta["bytes"] / 1e9 / server_work if server_work else float("nan"),
            "gb_per_cpu_s": meta["gb_per_cpu_s"]}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    rows = collections.defaultdict(list)
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json"):
            continue
        meta = json.load(open(os.path.join(d, name)))
        r = split(os.path.join(d, name[:-5] + ".data"), meta)
        rows[(meta["cell"], meta["server"])].append(r)
        print("%s %s run %d: server work %.2f CPU-s (%.2f on the client CPU), client receive on the server "
              "CPU %.2f s; %.3f GB/server-work-s, %.3f GB/CPU-s" %
              (meta["cell"], meta["server"], meta["run"], r["server_work_s"], r["server_work_on_client_cpu_s"],
               r["client_rx_on_server_cpu_s"], r["gb_per_server_work_s"], r["gb_per_cpu_s"]), flush=True)
    print("\n| cell | server | GB per server-work CPU-s | GB per server CPU-s | its work done on the client CPU "
          "| client receive done on its CPU |\n| --- | --- | --- | --- | --- | --- |")
    for (cell, server), rs in rows.items():
        def med(k):
            v = [r[k] for r in rs]
            return "%.3f (%.3f-%.3f)" % (statistics.median(v), min(v), max(v)) if len(v) > 1 else "%.3f" % v[0]
        share = statistics.median(r["server_work_on_client_cpu_s"] / r["server_work_s"] for r in rs)
        print("| %s | %s | %s | %s | %.0f %% | %.2f s |" % (
            cell, server, med("gb_per_server_work_s"), med("gb_per_cpu_s"), 100 * share,
            statistics.median(r["client_rx_on_server_cpu_s"] for r in rs)))


if __name__ == "__main__":
    main()
