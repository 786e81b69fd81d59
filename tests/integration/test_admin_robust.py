"""The admin listener and the control thread under abuse and odd input,
through the real binary:

  - a client that pipelines 2 MiB of requests and reads nothing: the
    server's memory stays bounded, /healthz keeps answering on another
    connection, and once the client reads, every answer arrives whole and
    in order;
  - 130 idle connections (over the cap of 128) do not lock out /healthz;
    a request trickled a byte at a time is closed at its deadline;
  - Upgrade is ignored (one answer, the connection stays usable); CONNECT
    gets one error answer and a close;
  - a reload that changes a RAM tier option fixed at start says so;
  - /stats tls_config counters survive a new worker generation;
  - a configuration path that is not UTF-8 leaves /stats valid JSON and
    /metrics valid for promtool;
  - control_cpus naming a CPU that does not exist reports where the
    control thread really runs;
  - admin.listen moves between a wildcard and a specific address on the
    same port, in a private network namespace (unshare -rn), and a move
    that cannot be completed leaves the old listener serving.
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
    # Under ASan freed memory waits in a quarantine (256 MiB by default)
    # before reuse, so RSS would measure the sanitizer, not the bound.
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = {"ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=4"}
    with Server(ROOT, admin=True, env=env) as srv:
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


# ---------------------------------------------------------------- connection slots

def test_idle_connections_do_not_lock_out_healthz():
    with Server(ROOT, admin=True) as srv:
        slow = connect(srv.admin_port, tls=False)
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n")  # a request under way
        time.sleep(0.2)
        idle = [connect(srv.admin_port, tls=False) for _ in range(130)]
        time.sleep(0.3)
        for i in range(3):
            t0 = time.time()
            r = admin_get(srv, "/healthz")
            expect_eq(r.status, 200, "/healthz with 131 other connections open (%d)" % i)
            expect(time.time() - t0 < 2, "answered in %.2fs" % (time.time() - t0))
        # the idle ones made room, not the one with a request under way
        slow.sendall(b"\r\n")
        rs, _ = responses(slow.recv(65536))
        expect_eq([st for st, _ in rs], [200], "the request under way is answered")
        for s in idle + [slow]:
            s.close()


def test_trickled_request_is_closed_at_its_deadline():
    with Server(ROOT, admin=True) as srv:
        s = connect(srv.admin_port, tls=False)
        t0 = time.time()
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        s.settimeout(0.5)
        closed = None
        while time.time() - t0 < 20:
            try:
                s.sendall(b"X: y\r\n")  # a byte now and then must not keep the slot
                if s.recv(4096) == b"":
                    closed = time.time() - t0
                    break
            except socket.timeout:
                continue
            except ConnectionError:
                closed = time.time() - t0
                break
        s.close()
        expect(closed is not None, "a request trickled for 20 s was not closed")
        expect(8 <= closed <= 14, "closed after %.1fs (deadline 10 s)" % closed)
        expect_eq(admin_get(srv, "/healthz").status, 200)


# ---------------------------------------------------------------- Upgrade, CONNECT

def test_upgrade_is_ignored_connect_refused():
    with Server(ROOT, admin=True) as srv:
        s = connect(srv.admin_port, tls=False)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        time.sleep(0.3)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        rs, rest = responses(recv_all(s, 5))
        expect_eq([(st, b) for st, b in rs], [(200, b"ok\n"), (200, b"ok\n")],
                  "one answer per request, Upgrade ignored")
        expect_eq(rest, b"", "nothing else")
        s.close()

        s = connect(srv.admin_port, tls=False)
        s.sendall(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        data = recv_all(s, 5)  # ends: the server closes
        rs, rest = responses(data)
        expect_eq(len(rs), 1, "one answer to CONNECT: %r" % data)
        expect(400 <= rs[0][0] < 500, "an error status: %d" % rs[0][0])
        expect_eq(rest, b"", "nothing after it")
        s.close()
        expect_eq(admin_get(srv, "/healthz").status, 200)


# ---------------------------------------------------------------- cache options at restart

def test_reload_of_fixed_cache_option_warns():
    with Origin() as origin:
        cache = ("cache:\n  ram_size: 32m\n  ram_object_max: %s\n  admission: false\n"
                 'origin:\n  urls: ["%s"]\n' % ("%s", origin.url))
        with Server(ROOT, admin=True, extra=cache % "4m") as srv:
            with open(srv.conf) as f:
                conf = f.read()
            with open(srv.conf, "w") as f:
                f.write(conf.replace("ram_object_max: 4m", "ram_object_max: 8m"))
            reload_and_wait(srv, 2)
            wait_for(lambda: "take effect at restart" in srv.read_log(), 5, "the restart warning")
            expect(re.search(r"\[warn\].*cache\.ram_object_max.*take effect at restart", srv.read_log()),
                   "the warning names cache.ram_object_max:\n" + srv.read_log())
            # and the other direction: back to what the tier has, no warning
            n = srv.read_log().count("take effect at restart")
            with open(srv.conf, "w") as f:
                f.write(conf)
            reload_and_wait(srv, 3)
            time.sleep(0.3)
            expect_eq(srv.read_log().count("take effect at restart"), n, "no warning for the tier's own value")


# ---------------------------------------------------------------- tls_config counters

def test_tls_config_counters_survive_new_workers():
    with Server(ROOT, admin=True, tls=True) as srv:
        for _ in range(3):
            c = Conn(srv.port, tls=True)
            expect_eq(c.request("GET", "/master.m3u8").status, 200)
            c.close()
        wait_for(lambda: stats(srv)["tls_config"]["handshakes"] == 3, 5, "3 handshakes in tls_config")
        with open(srv.conf) as f:
            conf = f.read()
        with open(srv.conf, "w") as f:
            f.write(conf.replace("workers: 1", "workers: 2"))
        reload_and_wait(srv, 2)
        wait_for(lambda: stats(srv)["config"]["server_generations"] == 1, 15, "old generation gone")
        c = Conn(srv.port, tls=True)
        expect_eq(c.request("GET", "/master.m3u8").status, 200)
        c.close()
        st = wait_for(lambda: (lambda s: s if s["tls"]["handshakes"] == 4 else None)(stats(srv)), 5,
                      "4 handshakes in tls")
        tc = st["tls_config"]
        expect_eq(tc["handshakes"], 4, "tls_config.handshakes across generations")
        expect_eq(tc["handshakes"], st["tls"]["handshakes"], "tls_config and tls agree")
        expect_eq(tc["connections"]["userspace"] + tc["connections"]["ktls"],
                  st["tls"]["connections_userspace"] + st["tls"]["connections_ktls"], "connections agree")


# ---------------------------------------------------------------- non-UTF-8 path

def test_non_utf8_config_path():
    srv = Server(ROOT, admin=True)
    bad = os.path.join(os.fsencode(srv.dir), b'he-\xff"\xc3(.yaml')
    os.rename(srv.conf, bad)
    srv.conf = os.fsdecode(bad)
    with srv:
        r = admin_get(srv, "/stats")
        expect_eq(r.status, 200)
        text = r.body.decode("utf-8")  # strict: fails on a raw 0xff
        p = subprocess.run([sys.executable, "-m", "json.tool"], input=r.body, capture_output=True, timeout=30)
        expect_eq(p.returncode, 0, "python3 -m json.tool: %s" % p.stderr.decode(errors="replace"))
        file = json.loads(text)["config"]["file"]
        expect(file.endswith('he-\ufffd"\ufffd(.yaml'), "config.file with U+FFFD: %r" % file)
        m = admin_get(srv, "/metrics").body
        line = [l for l in m.decode("utf-8").splitlines() if l.startswith("hlsedge_config_info")]
        expect_eq(len(line), 1, "config_info line")
        expect(line[0].endswith('he-\ufffd\\"\ufffd(.yaml"} 1'), "label value: %r" % line[0])
        promtool = shutil.which("promtool")
        if promtool:
            p = subprocess.run([promtool, "check", "metrics"], input=m, capture_output=True, timeout=30)
            expect_eq(p.returncode, 0, "promtool check metrics: %s%s" % (p.stdout.decode(), p.stderr.decode()))
        else:
            print("  (promtool not installed: the label checked as UTF-8 only)")


# ---------------------------------------------------------------- control_cpus

def control_allowed(pid):
    with open("/proc/%d/task/%d/status" % (pid, pid)) as f:
        return [l.split(":", 1)[1].strip() for l in f if l.startswith("Cpus_allowed_list:")][0]


def test_control_cpus_reports_the_cpus_it_runs_on():
    allowed = sorted(os.sched_getaffinity(0))
    with open("/sys/devices/system/cpu/possible") as f:
        possible = f.read().strip()
    last = int(re.split(r"[-,]", possible)[-1])
    if last >= 255:
        print("skip: every CPU number control_cpus takes may exist here (possible: %s)" % possible)
        return
    cpu = allowed[-1]
    with Server(ROOT, admin=True, extra="control_cpus: [%d, 255]\n" % cpu) as srv:
        # /stats first: the control thread pins itself after the workers
        # listen, and it answers only once it has
        expect_eq(stats(srv)["control_thread"]["cpus"], str(cpu), "/stats control_thread.cpus")
        expect_eq(control_allowed(srv.proc.pid), str(cpu), "the kernel's view")
        log = srv.read_log()
        expect("control thread on CPUs %d" % cpu in log and "control thread on CPUs %d,255" % cpu not in log,
               "where it runs, logged:\n" + log)
        expect(re.search(r"\[warn\] control_cpus: .*255", log), "the missing CPU warned about:\n" + log)


# ---------------------------------------------------------------- admin.listen, wildcard <-> specific

NETNS_ENV = "HE_ADMROB_NETNS"


def in_netns(name):
    """Runs test name of this file in a private network namespace (its own
    loopback, where binding 0.0.0.0 reaches nothing outside). False when
    not possible here; raises if the test failed there."""
    if os.environ.get(NETNS_ENV):
        return True
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if not unshare or not ip:
        print("skip: needs unshare and ip")
        return False
    probe = subprocess.run([unshare, "-rn", ip, "link", "set", "lo", "up"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        print("skip: no private network namespace here (%s)" % probe.stderr.decode().strip())
        return False
    env = dict(os.environ, **{NETNS_ENV: "1"})
    p = subprocess.run([unshare, "-rn", "sh", "-c", '"$0" link set lo up && exec "$1" "$2" "$3"', ip,
                        sys.executable, os.path.abspath(__file__), name],
                       env=env, capture_output=True, timeout=300)
    out = p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
    if p.returncode != 0:
        raise AssertionError("in the network namespace:\n" + out)
    return False


def answers(host, port):
    try:
        c = Conn(port, host=host, timeout=2, tls=False)
        try:
            return c.request("GET", "/healthz").status == 200
        finally:
            c.close()
    except OSError:
        return False


def stats_or_none(srv):
    """/stats, or None while the admin listener moves (its connections close)."""
    try:
        return stats(srv)
    except (OSError, EOFError):
        return None


def reload_moving_admin(srv, generation=None, failed=None):
    srv.signal(signal.SIGHUP)
    if generation:
        wait_for(lambda: (stats_or_none(srv) or {}).get("config", {}).get("generation") == generation, 10,
                 "configuration generation %d" % generation)
    if failed:
        wait_for(lambda: (stats_or_none(srv) or {}).get("config", {}).get("reloads_failed") == failed, 10,
                 "%d failed reloads" % failed)


def set_admin(srv, addr, extra=""):
    with open(srv.conf) as f:
        conf = f.read()
    conf = re.sub(r'(?m)^admin:\n  listen: "[^"]*"\n', 'admin:\n  listen: "%s"\n' % addr, conf)
    conf = re.sub(r"(?m)^listen: .*\n", "listen: [%s]\n" % ", ".join('"%s"' % l for l in srv.listen), conf)
    with open(srv.conf, "w") as f:
        f.write(conf + extra)


def test_admin_listen_wildcard_and_specific_same_port():
    if not in_netns("test_admin_listen_wildcard_and_specific_same_port"):
        return
    port = free_port()
    srv = Server(ROOT, admin=True)
    srv.admin_port = port
    set_admin(srv, "0.0.0.0:%d" % port)
    with srv:
        expect(answers("127.0.0.2", port), "wildcard: answers on 127.0.0.2")
        set_admin(srv, "127.0.0.1:%d" % port)
        reload_moving_admin(srv, 2)
        expect_eq(stats(srv)["config"]["reloads_failed"], 0, "no failed reload")
        expect(answers("127.0.0.1", port), "127.0.0.1 answers")
        expect(port_refuses(port, "127.0.0.2"), "127.0.0.2 no longer")

        set_admin(srv, "0.0.0.0:%d" % port)
        reload_moving_admin(srv, 3)
        expect(answers("127.0.0.2", port), "wildcard again")

        # A move that cannot complete: 127.0.0.3:port is someone else's, so
        # after giving up 0.0.0.0 the new address still cannot be bound;
        # the old listener comes back and the reload fails.
        set_admin(srv, "127.0.0.1:%d" % port)
        other = socket.socket()
        reload_moving_admin(srv, 4)
        set_admin(srv, "0.0.0.0:%d" % port)
        other.bind(("127.0.0.3", port))
        other.listen(1)
        reload_moving_admin(srv, failed=1)
        other.close()
        expect_eq(stats(srv)["config"]["generation"], 4, "generation unchanged")
        expect(answers("127.0.0.1", port), "the old listener serves")
        expect(re.search(r"reload failed.*admin listen 0\.0\.0\.0:%d" % port, srv.read_log()),
               "the failure logged:\n" + srv.read_log())

        # Later failures (new workers that cannot bind) undo the move too.
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        srv.listen = ["127.0.0.1:%d" % taken.getsockname()[1]]
        set_admin(srv, "0.0.0.0:%d" % port)
        reload_moving_admin(srv, failed=2)
        taken.close()
        expect(answers("127.0.0.1", port), "the old listener serves")
        expect(port_refuses(port, "127.0.0.2"), "and not the wildcard")


if __name__ == "__main__":
    sys.exit(run_main(globals(), TMP, sys.argv[1:] or None))
