"""control_cpus through the real binary: where the control thread runs
(auto: off the workers' CPUs; a list; shared when the workers take every
CPU), read back from the kernel (/proc/PID/task/TID/status) and from
/stats; changed live by a reload; worker generations started later keep
the process's CPUs rather than inheriting the control thread's; a CPU the
process may not use is refused with a warning and changes nothing."""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, make_library, run_main  # noqa: E402
from he_admin import reload_and_wait, stats, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-ccpu-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
ALLOWED = sorted(os.sched_getaffinity(0))


def cpu_text(cpus):
    """The kernel's list form: [0, 1, 2, 5] -> "0-2,5"."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append("%d-%d" % (cpus[i], cpus[j]) if j > i else "%d" % cpus[i])
        i = j + 1
    return ",".join(out)


def threads(pid):
    """{tid: (name, Cpus_allowed_list)} of the process's threads."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        base = "/proc/%d/task/%s/" % (pid, tid)
        try:
            name = open(base + "comm").read().strip()
            allowed = [l.split(":", 1)[1].strip() for l in open(base + "status")
                       if l.startswith("Cpus_allowed_list:")][0]
        except OSError:
            continue
        out[int(tid)] = (name, allowed)
    return out


def control_allowed(srv):
    # the control thread pins itself after the workers listen, and answers
    # the admin port only once it has: ask it first
    stats(srv)
    return threads(srv.proc.pid)[srv.proc.pid][1]  # the control thread is the main thread


def workers(srv):
    return sorted((n, a) for t, (n, a) in threads(srv.proc.pid).items() if n.startswith("he-worker-"))


def reload(srv, conf, generation):
    with open(srv.conf) as f:
        base = [l for l in f.read().splitlines(True)
                if not l.startswith(("cpus:", "control_cpus:", "workers:", "pin:"))]
    with open(srv.conf, "w") as f:
        f.write("".join(base) + conf)
    reload_and_wait(srv, generation)


def test_auto_keeps_off_the_workers_and_reload_moves_it():
    if len(ALLOWED) < 2:
        print("skip: needs 2 CPUs, this process may use %s" % ALLOWED)
        return
    first, rest = ALLOWED[0], ALLOWED[1:]
    with Server(ROOT, admin=True, extra="cpus: [%d]\n" % first) as srv:
        ct = stats(srv)["control_thread"]
        expect_eq(ct, {"cpus": cpu_text(rest), "apart_from_workers": True}, "/stats control_thread")
        expect_eq(control_allowed(srv), cpu_text(rest), "control thread's CPUs (kernel)")
        expect_eq(workers(srv), [("he-worker-0", str(first))], "worker pinned to its CPU")
        expect("control thread on CPUs %s" % cpu_text(rest) in srv.read_log(), "logged")
        worker_tids = sorted(t for t, (n, _) in threads(srv.proc.pid).items() if n.startswith("he-worker"))

        # a list, live: same workers, the control thread moves
        reload(srv, "workers: 1\ncpus: [%d]\ncontrol_cpus: [%d]\n" % (first, first), 2)
        expect_eq(stats(srv)["config"]["server_generations"], 1, "no new workers for control_cpus")
        expect_eq(sorted(t for t, (n, _) in threads(srv.proc.pid).items() if n.startswith("he-worker")),
                  worker_tids, "the same worker threads")
        expect_eq(stats(srv)["control_thread"], {"cpus": str(first), "apart_from_workers": False})
        expect_eq(control_allowed(srv), str(first), "control thread's CPUs (kernel)")
        expect("shared with workers" in srv.read_log(), "sharing a worker's CPU is logged")
        expect_eq(srv.get("/master.m3u8").status, 200)

        # new workers, unpinned, started by the control thread: they get
        # the process's CPUs, not the control thread's one
        reload(srv, "workers: 2\npin: false\ncontrol_cpus: [%d]\n" % first, 3)
        wait_for(lambda: stats(srv)["config"]["server_generations"] == 1, 10, "old generation gone")
        expect_eq(workers(srv), [("he-worker-0", cpu_text(ALLOWED)), ("he-worker-1", cpu_text(ALLOWED))],
                  "unpinned workers on every CPU of the process")
        expect_eq(control_allowed(srv), str(first), "control thread stays")
        expect_eq(stats(srv)["control_thread"]["apart_from_workers"], False, "unpinned workers may run there")

        # every CPU to the workers, auto: the control thread shares them
        reload(srv, "workers: %d\n" % len(ALLOWED), 4)
        expect_eq(stats(srv)["control_thread"], {"cpus": cpu_text(ALLOWED), "apart_from_workers": False})
        expect_eq(control_allowed(srv), cpu_text(ALLOWED))
        expect_eq(srv.get("/360p/index.m3u8").status, 200)


def test_cpu_outside_the_process_is_refused():
    bad = max(ALLOWED) + 1
    if bad > 255:
        print("skip: no CPU number outside the process's set")
        return
    with Server(ROOT, admin=True) as srv:
        before = control_allowed(srv)
        reload(srv, "workers: 1\ncontrol_cpus: [%d]\n" % bad, 2)
        expect("control_cpus: cannot run the control thread on CPUs %d" % bad in srv.read_log(),
               "warning in the log:\n" + srv.read_log())
        expect_eq(control_allowed(srv), before, "control thread where it was")
        expect_eq(stats(srv)["control_thread"]["cpus"], before)
        expect_eq(srv.get("/master.m3u8").status, 200)


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP))
