#!/usr/bin/env python3
"""Time to the first byte over TLS on a slow link: hlsedge's small first
record (tls.first_record) against 16 KiB records, and nginx at its default
ssl_buffer_size (16k) and at 4k, over HTTP/1.1; hlsedge over HTTP/2 too.

    sudo python3 tests/bench/tls-first-record.py [--rates 2mbit,10mbit,100mbit] [--fetches 15]

The servers run in a network namespace behind a veth pair whose server
side is shaped by tbf to each rate (the direction the responses take); the
client, curl in the root namespace, opens a new connection per fetch and
asks for the first 64 KiB of a segment. Per fetch: time from the end of
the TLS handshake to the response's first byte (curl's time_starttransfer
minus time_appconnect), which is when the first record is whole and
decrypted, and the time to the last byte. The servers alternate fetch by
fetch; medians per server and rate. Needs root (ip netns, tc), nginx,
curl and openssl; builds nothing (scripts/build.sh first).
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from he import make_certs  # noqa: E402
from veth import pair_down, pair_up, sh  # noqa: E402

NS = "he-tlsfr"
HOST_IF, NS_IF = "he-tlsfr0", "he-tlsfr1"
HOST_IP, NS_IP = "10.231.7.1", "10.231.7.2"


def netns_up():
    pair_up(NS, HOST_IF, NS_IF, HOST_IP, NS_IP)


def netns_down():
    pair_down(NS, HOST_IF)


def shape(rate):
    """tbf on the server side: a bucket of two full frames, so no burst
    carries a 16 KiB record past the rate."""
    sh("ip", "netns", "exec", NS, "tc", "qdisc", "replace", "dev", NS_IF, "root", "tbf", "rate", rate,
       "burst", "3028", "latency", "2s")


def start(cmd, log):
    return subprocess.Popen(["ip", "netns", "exec", NS] + cmd, stdout=log, stderr=subprocess.STDOUT)


def wait_port(port, proc, what):
    for _ in range(100):
        if proc.poll() is not None:
            raise SystemExit("%s exited at start" % what)
        r = sh("ip", "netns", "exec", NS, "bash", "-c", "exec 3<>/dev/tcp/%s/%d" % (NS_IP, port), check=False)
        if r.returncode == 0:
            return
        time.sleep(0.1)
    raise SystemExit("%s did not listen on %d" % (what, port))


def hlsedge_conf(d, name, port, certs, root, first_record):
    path = os.path.join(d, name + ".yaml")
    with open(path, "w") as f:
        f.write('listen: ["%s:%d"]\nworkers: 1\nroot: %s\nadmin:\n  listen: "off"\nlog:\n  access: ""\n'
                'tls:\n  listen: ["%s:%d"]\n  certificates: ["%s"]\n  first_record: %s\n'
                % (NS_IP, port + 1000, root, NS_IP, port, certs["default"], first_record))
    return path


def nginx_conf(d, name, port, certs, root, buffer_size):
    nd = os.path.join(d, name)
    os.makedirs(nd, exist_ok=True)
    path = os.path.join(nd, "nginx.conf")
    with open(path, "w") as f:
        f.write("daemon off;\nmaster_process off;\nworker_processes 1;\npid %s/pid;\nerror_log %s/err.log;\n"
                "events { worker_connections 1024; }\nhttp {\n access_log off;\n sendfile on;\n"
                " tcp_nopush on;\n client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;"
                " uwsgi_temp_path %s; scgi_temp_path %s;\n"
                " server {\n  listen %s:%d ssl;\n  ssl_certificate %s;\n  ssl_certificate_key %s;\n"
                "  ssl_buffer_size %s;\n  root %s;\n }\n}\n"
                % (nd, nd, nd, nd, nd, nd, nd, NS_IP, port, certs["default"], certs["default"], buffer_size, root))
    return path


def fetch(port, ca, path, http):
    r = sh("curl", http, "-s", "-o", "/dev/null", "--max-time", "30", "--cacert", ca, "--resolve",
           "hlsedge.test:%d:%s" % (port, NS_IP), "-r", "0-65535", "-w",
           "%{http_code} %{time_appconnect} %{time_starttransfer} %{time_total} %{size_download}",
           "https://hlsedge.test:%d%s" % (port, path), check=False)
    code, app, first, total, size = r.stdout.split()
    if code != "206" or int(size) != 65536:
        raise SystemExit("fetch from %d: status %s, %s bytes" % (port, code, size))
    return (float(first) - float(app)) * 1000, (float(total) - float(app)) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="2mbit,10mbit,100mbit")
    ap.add_argument("--fetches", type=int, default=15)
    ap.add_argument("--hlsedge", default=os.path.join(REPO, "build", "hlsedge"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (ip netns, tc)")
    for tool in ("nginx", "curl", "tc", "openssl"):
        if not shutil.which(tool):
            raise SystemExit("%s not installed" % tool)

    d = tempfile.mkdtemp(prefix="he-tlsfr-")
    os.chmod(d, 0o755)
    root = os.path.join(d, "lib")
    os.makedirs(root)
    with open(os.path.join(root, "seg.ts"), "wb") as f:
        f.write(os.urandom(2 << 20))
    certs = make_certs(os.path.join(d, "certs"))
    # (name, port, command or None for a server already started, curl's HTTP version)
    servers = [
        ("hlsedge first_record 1360", 18443, [args.hlsedge, "-c", hlsedge_conf(d, "he1360", 18443, certs, root, "1360")],
         "--http1.1"),
        ("hlsedge first_record 0", 18444, [args.hlsedge, "-c", hlsedge_conf(d, "he0", 18444, certs, root, "0")],
         "--http1.1"),
        ("hlsedge first_record 1360, HTTP/2", 18443, None, "--http2"),
        ("hlsedge first_record 0, HTTP/2", 18444, None, "--http2"),
        ("nginx ssl_buffer_size 16k", 18445, ["nginx", "-c", nginx_conf(d, "ng16", 18445, certs, root, "16k")],
         "--http1.1"),
        ("nginx ssl_buffer_size 4k", 18446, ["nginx", "-c", nginx_conf(d, "ng4", 18446, certs, root, "4k")],
         "--http1.1"),
    ]
    procs = []
    netns_up()
    try:
        log = open(os.path.join(d, "servers.log"), "wb")
        for name, port, cmd, _ in servers:
            if cmd:
                p = start(cmd, log)
                procs.append(p)
                wait_port(port, p, name)
        results = {}
        for rate in args.rates.split(","):
            shape(rate)
            for i in range(args.fetches):
                order = servers[i % len(servers):] + servers[:i % len(servers)]
                for name, port, _, http in order:
                    results.setdefault((rate, name), []).append(fetch(port, certs["ca"], "/seg.ts", http))
        print("| rate | server | first byte after the handshake, ms (min-max) | 64 KiB, ms |")
        print("| --- | --- | --- | --- |")
        for rate in args.rates.split(","):
            for name, _, _, _ in servers:
                r = results[(rate, name)]
                firsts = [x[0] for x in r]
                print("| %s | %s | %.1f (%.1f-%.1f) | %.1f |" % (rate, name, statistics.median(firsts), min(firsts),
                                                            max(firsts), statistics.median(x[1] for x in r)))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        netns_down()
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
