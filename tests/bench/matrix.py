#!/usr/bin/env python3
"""The peer matrix: hlsedge against every peer configuration, per client,
content and protocol, in one run (docs/performance.md, "The peer matrix").

    sudo python3 tests/bench/matrix.py                      # everything
    python3 tests/bench/matrix.py --runs 5 --duration 6 \\
        --clients wrk50,wrk200,linerate --content segments --tls 0

Every server is started once, pinned to --server-cpu, on its own port; they
all stay up and idle while another is measured. A cell (client x content x
protocol) is measured --runs times; each run goes through every server, the
first server rotating from run to run, so slow drift on this noisy guest
falls on all of them alike. Per run and server: bytes and requests the
client received divided by the server's CPU-seconds (utime+stime of its
processes from /proc, nginx master + worker), the client's p99, and the
busy share of the server's CPU (/proc/stat, so softirq work the kernel did
not charge to the process shows too). Each cell reports the median of the
runs with the min-max spread, and hlsedge's ratio to the best peer.
With --perf, both CPUs are recorded during each run for
tests/bench/cpu_split.py, which counts each server's work wherever it ran
(over loopback part of it runs on the client's CPU), and for
tests/bench/cpu_kinds.py, which splits the server CPU's time per GB into
interrupts off, network receive, the server's system calls and its user
code; perf's cost lowers every figure of such a run. raw.jsonl holds, per
run, the cross-CPU interrupts each CPU took and, with --netns, the bytes
per packet the server's end of the pair sent (the size of its TCP's skbs)
and the packets it took in per MB (mostly the client's ACKs).

Servers (--servers, comma-separated):
  hlsedge          scripts/build.sh's build/hlsedge on tests/bench/hlsedge.yaml.in
  hlsedge@K=V;K=V  the same with config keys set, e.g.
                   "hlsedge@send.sendfile_chunk=2m;send.cork=true" (a sweep)
                   (hlsedge-cache@K=V and hlsedge-ssd@K=V likewise)
  hlsedge/TAG      the binary given as --build TAG=PATH instead (two builds
                   in one matrix: hlsedge,hlsedge/new); hlsedge/TAG@K=V,
                   hlsedge-cache/TAG too
  nginx-video      Debian's nginx with the usual video settings: sendfile on,
                   tcp_nopush on, open_file_cache; sendfile_max_chunk left at
                   its default (2m in nginx 1.22)
  nginx-tuned      the same with sendfile_max_chunk 256k
  h2o              Debian's h2o 2.2.5, one thread, file.dir
  hlsedge-cache    hlsedge in front of an nginx origin (empty root, 1 GiB RAM
                   tier, warmed: every request a RAM hit)
  hlsedge-ssd      the same with no RAM tier and a 2 GiB SSD tier: SSD hits
  varnish          Debian's Varnish 7.1 (-s malloc,1G, warmed; HTTP only)
  varnish-file     Varnish with -s file (its disk storage)
  nginx-proxy-cache  nginx proxy_cache (+ proxy_cache_lock) in front of the
                   same origin, warmed (hits are files: sendfile)
Clients (--clients):
  wrkN             wrk -t1 -cN, random paths of the content
  linerate         hlsedge-loadgen, 100 HLS viewers at line rate over all
                   renditions (content: segments only)
  viewersN         hlsedge-loadgen, N real-time HLS viewers, 12 s buffer
  lgN              hlsedge-loadgen --mode urls -cN at line rate, each request
                   a path drawn afresh (zipf content: Zipf; segments:
                   uniform), so every server gets the same mix of
                   responses; `linerate`'s viewers keep their rendition,
                   and how a server shares its bandwidth among them sets
                   how many small responses it is asked for
  h2loadN          h2load -cN -m10 (HTTP/2, TLS only: ALPN h2), the content's
                   paths shuffled once; p99 from h2load's per-request log
Content (--content): segments (.ts), playlists (.m3u8), zipf (Zipf s=1.1
over every playlist and segment, through hlsedge-loadgen URL-list mode),
cold (cache misses: segments under a path no run asked for before,
/cold/TAG/..., which the origin serves as the segment itself; wrk only,
cache servers only, each path once: every request a fill from the origin).
Loopback, or with --netns a veth pair into a namespace of the client's,
the receive of each side on its own CPU; every client run is bounded by
--duration.
"""
import argparse
import atexit
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from veth import pair_down, pair_up, sh

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(REPO, "tests", "bench")
CLK = os.sysconf("SC_CLK_TCK")
CC_M3U8 = "no-cache"
CC_TS = "public, max-age=31536000, immutable"
# Every TLS server prefers the suites hlsedge prefers (server/net/tls.c),
# so that all pay the same cipher. Left alone, nginx and h2o take the
# client's first choice, and OpenSSL's clients (wrk, h2load, curl) offer
# AES-256-GCM first: 14 AES rounds a block against 10.
TLS13_SUITES = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
TLS12_CIPHERS = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                 "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305")
NGINX_SUITES = ("ssl_conf_command Ciphersuites %s;\nssl_ciphers %s;\nssl_prefer_server_ciphers on;\n" %
                (TLS13_SUITES, TLS12_CIPHERS))


# --netns: the client in a namespace of its own behind a veth pair, the
# servers in this one on the pair's near end
NETNS = "he-matrix-client"
NETNS_SERVER_IF, NETNS_CLIENT_IF = "hemx-srv", "hemx-cli"
NETNS_SERVER_IP, NETNS_CLIENT_IP = "10.231.0.1", "10.231.0.2"

CACHES = ("hlsedge-cache", "hlsedge-ssd", "varnish", "varnish-file", "nginx-proxy-cache")


def log(msg):
    print("matrix: " + msg, file=sys.stderr, flush=True)


def die(msg):
    log(msg)
    sys.exit(1)


def proc_ticks(pids):
    total = 0
    for i, pid in enumerate(pids):
        try:
            f = open("/proc/%d/stat" % pid).read().rsplit(") ", 1)[1].split()
        except OSError:
            continue
        total += int(f[11]) + int(f[12])
        if i == 0:
            total += int(f[13]) + int(f[14])
    return total


def cross_cpu_interrupts():
    """Function-call and rescheduling interrupts received so far, per CPU:
    the wake-ups one CPU sent another (RPS hands a frame to the other
    side's CPU with one; on a guest each is an exit to the hypervisor)."""
    counts = {}
    for line in open("/proc/interrupts"):
        f = line.split()
        if f and f[0] in ("CAL:", "RES:"):
            for cpu, v in enumerate(f[1:1 + os.cpu_count()]):
                counts[cpu] = counts.get(cpu, 0) + int(v)
                if f[0] == "RES:":
                    counts[("RES", cpu)] = int(v)
    return counts


def calls_and_sleeps(pids):
    """read- and write-side system calls of the server's processes, and
    the times its threads went to sleep (voluntary context switches)."""
    calls = sleeps = 0
    for pid in pids:
        try:
            for line in open("/proc/%d/io" % pid):
                if line.startswith(("syscr:", "syscw:")):
                    calls += int(line.split()[1])
            for tid in os.listdir("/proc/%d/task" % pid):
                for line in open("/proc/%d/task/%s/status" % (pid, tid)):
                    if line.startswith("voluntary_ctxt_switches:"):
                        sleeps += int(line.split()[1])
        except OSError:
            pass
    return calls, sleeps


def link_packets(args):
    """Packets the server's end of the veth pair sent and took in (--netns):
    a TSO frame counts once however many segments it carries, so bytes per
    sent packet is the size of the skbs the server's TCP built, and taken-in
    packets are mostly the client's ACKs."""
    if not getattr(args, "client_ns", None):
        return 0, 0
    base = "/sys/class/net/%s/statistics/" % NETNS_SERVER_IF
    return int(open(base + "tx_packets").read()), int(open(base + "rx_packets").read())


def cpu_busy(cpu):
    for line in open("/proc/stat"):
        f = line.split()
        if f[0] == "cpu%d" % cpu:
            v = [int(x) for x in f[1:]]
            return sum(v) - v[3] - v[4], sum(v)
    return 0, 0


def netns_down():
    pair_down(NETNS, NETNS_SERVER_IF)


def netns_up(args):
    """The client's namespace and the veth pair between the two. Each end's
    receive queue is steered (RPS) to its own side's CPU, so a frame is
    taken in on the CPU of the side it is for, as a NIC's interrupt would
    be on two machines: the server's core does its ACKs and requests, the
    client's core its data. Over loopback (and a veth pair without RPS)
    the receive runs in the sender's softirq instead, wherever that is."""
    inns = pair_up(NETNS, NETNS_SERVER_IF, NETNS_CLIENT_IF, NETNS_SERVER_IP, NETNS_CLIENT_IP)
    # the client's TCP as this namespace's (a new one starts at the kernel's defaults)
    for key in ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        sh(*inns, "sysctl", "-qw", "%s=%s" % (key, sh("sysctl", "-n", key).stdout.strip().replace("\t", " ")))
    open("/sys/class/net/%s/queues/rx-0/rps_cpus" % NETNS_SERVER_IF, "w").write("%x" % (1 << args.server_cpu))
    sh(*inns, "sh", "-c", "echo %x > /sys/class/net/%s/queues/rx-0/rps_cpus" % (1 << args.client_cpu,
                                                                                NETNS_CLIENT_IF))
    args.addr = NETNS_SERVER_IP
    args.client_ns = inns


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def port_free(addr, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT from the last run is fine
    try:
        s.bind((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Server:
    def __init__(self, name, port, args, tmp):
        self.name, self.port, self.args, self.tmp = name, port, args, tmp
        self.proc = None
        self.cipher = ""

    def pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def scheme(self):
        return "https" if self.args.tls_on else "http"

    def wait_ready(self):
        ctx = ["-k"] if self.args.tls_on else []
        for _ in range(100):
            if self.proc.poll() is not None:
                die("%s exited at start (log in %s)" % (self.name, self.tmp))
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "1"] + ctx +
                               ["%s://%s:%d/master.m3u8" % (self.scheme(), self.args.addr, self.port)],
                               capture_output=True, text=True)
            if r.stdout == "200":
                return
            time.sleep(0.1)
        die("%s did not come up on port %d" % (self.name, self.port))

    def check(self, root, seg, pl):
        ctx = ["-k"] if self.args.tls_on else []
        for p in ("/master.m3u8", pl, seg):
            out = os.path.join(self.tmp, "check")
            subprocess.run(["curl", "-sf", "--max-time", "10", "-o", out] + ctx +
                           ["%s://%s:%d%s" % (self.scheme(), self.args.addr, self.port, p)], check=True)
            if open(out, "rb").read() != open(root + p, "rb").read():
                die("%s: GET %s differs from the file" % (self.name, p))

    def negotiated(self):
        """The suite a client with OpenSSL's default offer gets (wrk's and
        h2load's offer), or "" over plain HTTP."""
        if not self.args.tls_on:
            return ""
        r = subprocess.run(["openssl", "s_client", "-connect", "%s:%d" % (self.args.addr, self.port),
                            "-servername", "localhost"], input="", capture_output=True, text=True, timeout=10)
        m = re.search(r"Cipher is (\S+)", r.stdout)
        if not m:
            die("%s: no TLS suite from openssl s_client: %s" % (self.name, r.stdout[-300:] + r.stderr[-300:]))
        return m.group(1)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def launch_hlsedge(name, port, args, tmp, conf):
    """Starts hlsedge pinned on conf (YAML text), with the TLS listener on
    port when the pass is HTTPS (the plain one is then port + 1000)."""
    if args.tls_on:
        lines = '  listen: ["%s:%d"]\n  certificates: ["%s"]\n' % (args.addr, port, args.pem)
        if "\ntls:\n" in conf:  # a variant's tls.* keys (hlsedge@tls.first_record=0): one section
            conf = conf.replace("\ntls:\n", "\ntls:\n" + lines, 1)
        else:
            conf += "tls:\n" + lines
    path = os.path.join(tmp, "hlsedge-%d.yaml" % port)
    open(path, "w").write(conf)
    s = Server(name, port, args, tmp)
    s.proc = subprocess.Popen(args.rt + ["taskset", "-c", str(args.server_cpu), hlsedge_binary(name, args), "-c", path],
                              stdout=open(path + ".log", "w"), stderr=subprocess.STDOUT)
    return s


def variant_sections(name):
    """The config keys of a variant name ("hlsedge@send.cork=true;..."), by section."""
    sections = {}
    if "@" in name:
        for kv in name.split("@", 1)[1].split(";"):
            k, v = kv.split("=", 1)
            sec, leaf = k.split(".", 1)
            sections.setdefault(sec, []).append((leaf, v))
    return sections


def with_sections(name, conf, sections, where):
    """conf (YAML text) with a variant's sections appended; one the base
    config (where) has already is refused, not merged."""
    for sec, items in sections.items():
        if ("\n%s:" % sec) in conf:
            die("%s: section %s is in %s already" % (name, sec, where))
        conf += "%s:\n" % sec + "".join("  %s: %s\n" % kv for kv in items)
    return conf


def base_name(name):
    """The server kind: "hlsedge-cache" of "hlsedge-cache/new@cache.ram_size=48m"."""
    return name.split("@", 1)[0].split("/", 1)[0]


def hlsedge_binary(name, args):
    tag = name.split("@", 1)[0].partition("/")[2]
    if not tag:
        return args.hlsedge
    if tag not in args.builds:
        die("%s: no --build %s=PATH" % (name, tag))
    return args.builds[tag]


def start_hlsedge(name, port, args, tmp, root):
    tpl = open(os.path.join(BENCH, "hlsedge.yaml.in")).read()
    plain = port + 1000 if args.tls_on else port
    conf = (tpl.replace("127.0.0.1:@PORT@", "%s:@PORT@" % args.addr)
            .replace("@CPU@", str(args.server_cpu)).replace("@PORT@", str(plain))
            .replace("@ROOT@", root).replace("@MAX_CONNS@", "8192")
            .replace("@CC_M3U8@", CC_M3U8).replace("@CC_TS@", CC_TS))
    conf = with_sections(name, conf, variant_sections(name), "hlsedge.yaml.in")
    return launch_hlsedge(name, port, args, tmp, conf)


def start_nginx(name, port, args, tmp, root):
    d = os.path.join(tmp, "nginx-%d" % port)
    os.makedirs(d, exist_ok=True)
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    tls = ""
    if args.tls_on:
        tls = ("ssl_certificate %s;\nssl_certificate_key %s;\nssl_protocols TLSv1.2 TLSv1.3;\n"
               "ssl_session_cache shared:SSL:10m;\nssl_session_tickets on;\n" % (args.crt, args.key)) + NGINX_SUITES
    open(os.path.join(d, "nginx-tls.conf"), "w").write(tls)
    conf = open(os.path.join(BENCH, "nginx.conf.in")).read()
    conf = (conf.replace("127.0.0.1:@PORT@", "%s:@PORT@" % args.addr)
            .replace("@USER_LINE@", "user root;" if os.getuid() == 0 else "")
            .replace("@CPU_MASK@", "%x" % (1 << args.server_cpu)).replace("@TMP@", d)
            .replace("@PORT@", str(port)).replace("@ROOT@", root).replace("@CC_M3U8@", CC_M3U8)
            .replace("@CC_TS@", CC_TS).replace("@SSL@", " ssl http2" if args.tls_on else ""))
    if name == "nginx-video":  # Debian's default chunk (2m): drop the tuned line
        lines = [ln for ln in conf.split("\n") if "sendfile_max_chunk" not in ln]
        conf = "\n".join(lines)
    path = os.path.join(d, "nginx.conf")
    open(path, "w").write(conf)
    s = Server(name, port, args, tmp)
    s.proc = subprocess.Popen(args.rt + ["taskset", "-c", str(args.server_cpu), "nginx", "-p", d, "-c", path,
                               "-e", os.path.join(d, "error.log"), "-g", "daemon off;"],
                              stdout=open(path + ".log", "w"), stderr=subprocess.STDOUT)
    return s


def start_h2o(name, port, args, tmp, root):
    listen = "listen:\n  port: %d\n  host: %s\n" % (port, args.addr)
    if args.tls_on:
        listen += ("  ssl:\n    certificate-file: %s\n    key-file: %s\n    cipher-suite: %s\n"
                   "    cipher-preference: server\n" % (args.crt, args.key, TLS12_CIPHERS))
    conf = (listen + "num-threads: 1\nuser: root\npid-file: %s/h2o-%d.pid\n" % (tmp, port) +
            "http1-request-timeout: 65\nfile.send-compressed: OFF\n"
            "file.mime.addtypes:\n  application/vnd.apple.mpegurl: .m3u8\n  video/mp2t: .ts\n"
            "hosts:\n  default:\n    paths:\n      /:\n        file.dir: %s\n"
            "        header.add: \"Access-Control-Allow-Origin: *\"\n" % root)
    path = os.path.join(tmp, "h2o-%d.conf" % port)
    open(path, "w").write(conf)
    # h2o 2.2 sets no TLS 1.3 suites of its own: OpenSSL's configuration does
    ossl = os.path.join(tmp, "h2o-openssl.cnf")
    open(ossl, "w").write("openssl_conf = init\n[init]\nssl_conf = ssl\n[ssl]\nsystem_default = tls\n"
                          "[tls]\nCiphersuites = %s\nOptions = ServerPreference\n" % TLS13_SUITES)
    s = Server(name, port, args, tmp)
    s.proc = subprocess.Popen(args.rt + ["taskset", "-c", str(args.server_cpu), "h2o", "-c", path],
                              stdout=open(path + ".log", "w"), stderr=subprocess.STDOUT,
                              env=dict(os.environ, OPENSSL_CONF=ossl))
    return s


def start_origin(args, tmp, root):
    """The origin the cache tiers fill from: nginx on the client's CPU (it
    only works during the warm-up, and in the cold cells: /cold/TAG/PATH is
    PATH)."""
    port = args.base_port + 900
    d = os.path.join(tmp, "origin")
    os.makedirs(d, exist_ok=True)
    conf = ("%s\nworker_processes 1;\npid %s/nginx.pid;\nerror_log %s/error.log;\n"
            "events { worker_connections 4096; }\nhttp {\n access_log off;\n sendfile on;\n"
            " types { application/vnd.apple.mpegurl m3u8; video/mp2t ts; }\n"
            " client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s; uwsgi_temp_path %s;"
            " scgi_temp_path %s;\n server { listen 127.0.0.1:%d; root %s;\n"
            "  location ^~ /cold/ { rewrite ^/cold/[^/]+(/.*)$ $1 last; }\n"
            "  location ~ \\.ts$ { add_header Cache-Control \"%s\"; }\n"
            "  location ~ \\.m3u8$ { add_header Cache-Control \"max-age=3600\"; } }\n}\n" %
            ("user root;" if os.getuid() == 0 else "", d, d, d, d, d, d, d, port, root, CC_TS))
    path = os.path.join(d, "nginx.conf")
    open(path, "w").write(conf)
    proc = subprocess.Popen(args.rt + ["taskset", "-c", str(args.client_cpu), "nginx", "-p", d, "-c", path,
                             "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    args.origin_port = port
    return proc


def start_hlsedge_cache(name, port, args, tmp, root):
    empty = os.path.join(tmp, "empty-root")
    os.makedirs(empty, exist_ok=True)
    tier = "  ram_size: 1g\n  ram_object_max: 64m\n"
    sections = variant_sections(name)
    if base_name(name) == "hlsedge-ssd":  # no RAM tier: every hit from the SSD tier's files
        ssd = os.path.join(tmp, "ssd-%d" % port)
        os.makedirs(ssd, exist_ok=True)
        tier = '  ram_size: 0\n  ssd: ["%s:2g"]\n' % ssd
    cache_kv = sections.pop("cache", [])
    # a variant's own tier size (hlsedge-cache@cache.ram_size=48m: a tier
    # smaller than the library, so hits and evictions mix) replaces ours
    tier = "".join(l + "\n" for l in tier.splitlines() if l.split(":")[0].strip() not in dict(cache_kv))
    conf = ('listen: ["%s:%d"]\nworkers: 1\ncpus: [%d]\nroot: "%s"\nadmin:\n  listen: "off"\n'
            "log:\n  access: \"\"\ncors:\n  allow_origin: \"*\"\ntimeouts:\n  keepalive: 65s\n"
            "limits:\n  max_connections: 8192\n"
            "cache:\n%s  admission: false\n  prefetch: 0\n"
            'origin:\n  urls: ["http://127.0.0.1:%d"]\n  sources: origin-first\n' %
            (args.addr, port + 1000 if args.tls_on else port, args.server_cpu, empty,
             tier + "".join("  %s: %s\n" % kv for kv in cache_kv), args.origin_port))
    conf = with_sections(name, conf, sections, "the cache edge's config")
    return launch_hlsedge(name, port, args, tmp, conf)


def start_varnish(name, port, args, tmp, root):
    """Varnish 7.1, malloc storage; plain HTTP only (it has no TLS)."""
    d = os.path.join(tmp, "varnish-%d" % port)
    os.makedirs(d, exist_ok=True)
    s = Server(name, port, args, tmp)
    s.proc = subprocess.Popen(args.rt + ["taskset", "-c", str(args.server_cpu), "varnishd", "-F", "-n", d,
                               "-a", "%s:%d" % (args.addr, port), "-b", "127.0.0.1:%d" % args.origin_port,
                               "-s", ("file,%s/storage,2G" % d) if name == "varnish-file" else "malloc,1G",
                               "-p", "thread_pools=1"],
                              stdout=open(d + ".log", "w"), stderr=subprocess.STDOUT)
    return s


def start_nginx_proxy_cache(name, port, args, tmp, root):
    d = os.path.join(tmp, "npc-%d" % port)
    os.makedirs(d, exist_ok=True)
    tls = ""
    if args.tls_on:
        tls = (" ssl;\n  ssl_certificate %s;\n  ssl_certificate_key %s;\n  ssl_protocols TLSv1.2 TLSv1.3;\n  %s" %
               (args.crt, args.key, NGINX_SUITES.rstrip(";\n").replace("\n", "\n  ")))
    conf = ("%s\nworker_processes 1;\nworker_cpu_affinity %x;\npid %s/nginx.pid;\nerror_log %s/error.log;\n"
            "events { worker_connections 16384; multi_accept on; }\nhttp {\n access_log off;\n"
            " sendfile on;\n tcp_nopush on;\n keepalive_requests 1000000;\n"
            " open_file_cache max=10000 inactive=60s;\n"
            " client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s; uwsgi_temp_path %s;"
            " scgi_temp_path %s;\n proxy_cache_path %s/cache levels=1:2 keys_zone=c:10m max_size=2g;\n"
            " server { listen %s:%d%s;\n  location / { proxy_pass http://127.0.0.1:%d;"
            " proxy_cache c; proxy_cache_lock on; proxy_cache_valid 200 1h;"
            " proxy_http_version 1.1; proxy_set_header Connection \"\"; } }\n}\n" %
            ("user root;" if os.getuid() == 0 else "", 1 << args.server_cpu, d, d, d, d, d, d, d, d,
             args.addr, port, tls, args.origin_port))
    path = os.path.join(d, "nginx.conf")
    open(path, "w").write(conf)
    s = Server(name, port, args, tmp)
    s.proc = subprocess.Popen(args.rt + ["taskset", "-c", str(args.server_cpu), "nginx", "-p", d, "-c", path,
                               "-g", "daemon off;"], stdout=open(path + ".log", "w"), stderr=subprocess.STDOUT)
    return s


def start_server(name, port, args, tmp, root):
    if base_name(name) in ("hlsedge-cache", "hlsedge-ssd"):
        return start_hlsedge_cache(name, port, args, tmp, root)
    if name in ("varnish", "varnish-file"):
        return start_varnish(name, port, args, tmp, root)
    if name == "nginx-proxy-cache":
        return start_nginx_proxy_cache(name, port, args, tmp, root)
    if name.startswith("hlsedge"):
        return start_hlsedge(name, port, args, tmp, root)
    if name in ("nginx-video", "nginx-tuned"):
        return start_nginx(name, port, args, tmp, root)
    if name == "h2o":
        return start_h2o(name, port, args, tmp, root)
    die("unknown server %s" % name)


def run_client(client, content, server, args, files, duration):
    """Runs one bounded client; returns dict(bytes, requests, p99_ms, errors),
    and for wrk p50_ms and max_ms too."""
    base = "%s://%s:%d" % (server.scheme(), args.addr, server.port)
    pin = args.client_ns + args.rt + ["taskset", "-c", str(args.client_cpu)]
    if client.startswith("wrk"):
        conns = int(client[3:])
        out = subprocess.run(pin + ["wrk", "-t1", "-c%d" % conns, "-d%ds" % duration, "--timeout", "10s",
                                    "-s", os.path.join(BENCH, "random-paths.lua"), base, "--",
                                    files[content]] + (["seq"] if content == "cold" else []),
                             capture_output=True, text=True, timeout=duration + 60)
        line = [ln for ln in out.stdout.split("\n") if ln.startswith("WRK_RESULT ")]
        if not line:
            die("wrk gave no result: %s %s" % (out.stdout[-300:], out.stderr[-300:]))
        kv = dict(f.split("=") for f in line[-1].split()[1:])
        return {"bytes": int(kv["bytes"]), "requests": int(kv["requests"]),
                "p99_ms": int(kv["p99_us"]) / 1000.0, "p50_ms": int(kv["p50_us"]) / 1000.0,
                "max_ms": int(kv["max_us"]) / 1000.0,
                "errors": sum(int(v) for k, v in kv.items() if k.startswith("err_"))}
    lg = [args.loadgen, "--json", "-q", "-t", "1", "--cpus", str(args.client_cpu), "-d", "%ds" % duration]
    if args.tls_on:
        lg.append("-k")
    if client == "linerate":
        lg += ["--viewers", "100", "--pace", "linerate", "--rendition", "mix:1,1,1,1,1", "--vod",
               base + "/master.m3u8"]
    elif client.startswith("viewers"):
        lg += ["--viewers", client[7:], "--pace", "realtime", "--rendition", "mix:1,1,1,1,1",
               "--vod", base + "/master.m3u8"]
    elif client.startswith("lg"):
        urls = os.path.join(server.tmp, "urls-%s-%s-%d.txt" % (server.scheme(), content, server.port))
        if not os.path.exists(urls):
            with open(urls, "w") as f:
                for p in open(files[content]):
                    f.write(base + p)
        # each request drawn, so the mix of responses is the same whatever
        # the server's pace (a walk in turn would follow it)
        lg += ["--mode", "urls", "-c", client[2:], "--url-file", urls,
               "--popularity", "zipf:1.1" if content == "zipf" else "uniform"]
    elif client.startswith("h2load"):
        return run_h2load(int(client[6:]), content, server, args, files, duration, pin, base)
    else:
        die("unknown client %s" % client)
    out = subprocess.run(pin + lg, capture_output=True, text=True, timeout=duration + 60)
    if out.returncode not in (0, 1):
        die("loadgen failed (%d): %s" % (out.returncode, out.stderr[-400:]))
    j = json.loads(out.stdout)
    hist = j.get("ttfb") if client.startswith("viewers") else j.get("response")
    return {"bytes": j["bytes"], "requests": j["requests"],
            "p99_ms": (hist or {}).get("p99_ms", float("nan")), "errors": j["errors"]}


def run_h2load(conns, content, server, args, files, duration, pin, base):
    """HTTP/2 over TLS: h2load's -i list is walked in order by every
    client, so it is the content's paths in one fixed shuffled order."""
    urls = os.path.join(server.tmp, "h2urls-%s-%d.txt" % (content, server.port))
    if not os.path.exists(urls):
        paths = open(files[content]).read().split()
        random.Random(1).shuffle(paths)
        open(urls, "w").write("".join(base + p + "\n" for p in paths))
    logf = os.path.join(server.tmp, "h2load-%d.log" % server.port)
    out = subprocess.run(pin + ["h2load", "-c%d" % conns, "-m10", "-D%d" % duration, "--log-file", logf,
                                "-i", urls], capture_output=True, text=True, timeout=duration + 60)
    m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored", out.stdout)
    t = re.search(r"traffic: \S+ \((\d+)\) total", out.stdout)
    if not m or not t or "h2" not in out.stdout:
        die("h2load gave no result: %s %s" % (out.stdout[-300:], out.stderr[-300:]))
    times = sorted(int(ln.split()[2]) for ln in open(logf) if len(ln.split()) >= 3)
    p99 = times[int(len(times) * 0.99)] / 1000.0 if times else float("nan")
    os.unlink(logf)
    return {"bytes": int(t.group(1)), "requests": int(m.group(3)), "p99_ms": p99,
            "errors": int(m.group(4)) + int(m.group(5))}


def cold_paths(tmp, segs, tag, count=50000):
    """A list of segment paths no earlier run asked for: /cold/TAG-N/SEG,
    N counting up, so that a cache holds none of them (wrk walks it in
    order, each path once)."""
    path = os.path.join(tmp, "cold-%s.txt" % tag)
    with open(path, "w") as f:
        for n in range(count):
            f.write("/cold/%s-%d%s\n" % (tag, n, segs[n % len(segs)]))
    return path


def perf_path(args, client, content, server, run):
    return os.path.join(args.out, "perf", "%s-%s-%s-%s-%d" % (
        client, content, "https" if args.tls_on else "http", server.name.replace(";", "+").replace("/", "_"), run))


def measure(client, content, server, args, files, run=0):
    pids = server.pids()
    t0 = proc_ticks(pids)
    b0, w0 = cpu_busy(args.server_cpu)
    cb0, cw0 = cpu_busy(args.client_cpu)
    i0, sc0 = cross_cpu_interrupts(), calls_and_sleeps(pids)
    tx0, rx0 = link_packets(args)
    rec = None
    if args.perf:
        # both CPUs: over loopback each does part of the other's TCP work
        # (tests/bench/cpu_split.py reads these)
        rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-g", "-C",
                                "%d,%d" % (args.server_cpu, args.client_cpu),
                                "-o", perf_path(args, client, content, server, run) + ".data"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
    r = run_client(client, content, server, args, files, args.duration)
    if rec:
        rec.send_signal(signal.SIGINT)
        rec.wait(60)
    t1 = proc_ticks(pids)
    b1, w1 = cpu_busy(args.server_cpu)
    cb1, cw1 = cpu_busy(args.client_cpu)
    i1, sc1 = cross_cpu_interrupts(), calls_and_sleeps(pids)
    tx1, rx1 = link_packets(args)
    cpu = (t1 - t0) / CLK
    # per thousand responses: the wake-ups each side's CPU took, and the
    # server's read and write calls (io_uring's operations are not counted)
    kreq = r["requests"] / 1000.0
    per_kreq = lambda n: n / kreq if kreq else 0
    r["ipi_server_cpu_per_kreq"] = per_kreq(i1.get(args.server_cpu, 0) - i0.get(args.server_cpu, 0))
    r["ipi_client_cpu_per_kreq"] = per_kreq(i1.get(args.client_cpu, 0) - i0.get(args.client_cpu, 0))
    # of those, the rescheduling ones: a task woken on the other CPU
    r["resched_server_cpu_per_kreq"] = per_kreq(i1.get(("RES", args.server_cpu), 0) -
                                                i0.get(("RES", args.server_cpu), 0))
    r["syscalls_per_kreq"] = per_kreq(sc1[0] - sc0[0])
    r["sleeps_per_kreq"] = per_kreq(sc1[1] - sc0[1])
    if tx1 > tx0:
        r["kb_per_tx_packet"] = r["bytes"] / 1e3 / (tx1 - tx0)
        r["rx_packets_per_mb"] = (rx1 - rx0) / (r["bytes"] / 1e6) if r["bytes"] else 0
    r["cpu_s"] = cpu
    r["busy"] = (b1 - b0) / (w1 - w0) if w1 > w0 else float("nan")
    r["client_busy"] = (cb1 - cb0) / (cw1 - cw0) if cw1 > cw0 else float("nan")
    # Over loopback the receiver's TCP work runs on whichever CPU gets to
    # it: in the sender's softirq, or on the reader's CPU when the reader
    # holds its socket (the backlog). A server can look cheaper per byte
    # by leaving more of it to the client; both CPUs' busy time together
    # is what the pair cost.
    both = ((b1 - b0) + (cb1 - cb0)) / CLK
    r["gb_per_both_cpu_s"] = r["bytes"] / 1e9 / both if both else float("nan")
    r["gb_per_cpu_s"] = r["bytes"] / 1e9 / cpu if cpu else float("nan")
    r["req_per_cpu_s"] = r["requests"] / cpu if cpu else float("nan")
    return r


def cell_ok(client, content, tls):
    if content == "cold":
        return client.startswith("wrk")
    if client == "linerate" or client.startswith("viewers"):
        return content == "segments"  # HLS viewers fetch both; listed once
    if client.startswith("lg"):
        return content in ("zipf", "segments")
    if client.startswith("h2load"):
        return tls and content in ("segments", "playlists")
    return content in ("segments", "playlists")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="hlsedge,nginx-video,nginx-tuned,h2o")
    ap.add_argument("--clients", default="wrk50,wrk200,linerate,viewers1000,lg50,h2load100")
    ap.add_argument("--content", default="segments,playlists,zipf")
    ap.add_argument("--tls", default="0,1", help="protocols: 0 = HTTP, 1 = HTTPS")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=8, help="seconds per measured run")
    ap.add_argument("--warmup", type=int, default=2, help="seconds, once per cell and server")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--base-port", type=int, default=19080)
    ap.add_argument("--library", default=os.path.join(REPO, "demo", "library"))
    ap.add_argument("--hlsedge", default=os.path.join(REPO, "build", "hlsedge"))
    ap.add_argument("--loadgen", default=os.path.join(REPO, "build", "hlsedge-loadgen"))
    ap.add_argument("--build", action="append", default=[], metavar="TAG=PATH",
                    help="another hlsedge binary, run as server hlsedge/TAG (repeatable)")
    ap.add_argument("--rt", action="store_true",
                    help="servers and clients under chrt -r 10 (SCHED_RR), so other jobs on the "
                         "machine cannot take the measured CPUs; the kernel's RT throttling "
                         "(sched_rt_runtime_us) then stops both 50 ms a second, which shows in p99")
    ap.add_argument("--netns", action="store_true",
                    help="the client in a network namespace behind a veth pair, each side's receive "
                         "on its own CPU (needs root; see netns_up)")
    ap.add_argument("--congestion", default="", metavar="ALGO",
                    help="the host's TCP congestion control for the run (net.ipv4.tcp_congestion_control, "
                         "e.g. cubic, Debian's kernel's default), put back at the end (needs root); with "
                         "--netns the client's namespace takes it too")
    ap.add_argument("--perf", action="store_true",
                    help="perf record both CPUs during each measured run, into OUT/perf/")
    ap.add_argument("--out", default=os.path.join(REPO, "var", "bench", "matrix-" + time.strftime("%Y%m%d-%H%M%S")))
    args = ap.parse_args()
    args.builds = {}
    for b in args.build:
        tag, _, path = b.partition("=")
        if not tag or not os.access(path, os.X_OK):
            die("--build %s: TAG=PATH of an executable" % b)
        args.builds[tag] = os.path.abspath(path)
    args.rt = ["chrt", "-r", "10"] if args.rt else []
    args.addr, args.client_ns = "127.0.0.1", []
    # a SIGTERM stops the servers and takes the namespace down as an error would
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.congestion:
        if os.geteuid() != 0:
            die("--congestion needs root")
        was = sh("sysctl", "-n", "net.ipv4.tcp_congestion_control").stdout.strip()
        if sh("sysctl", "-qw", "net.ipv4.tcp_congestion_control=" + args.congestion, check=False).returncode:
            die("--congestion %s: not one of %s" % (args.congestion, open(
                "/proc/sys/net/ipv4/tcp_available_congestion_control").read().strip()))
        atexit.register(sh, "sysctl", "-qw", "net.ipv4.tcp_congestion_control=" + was)
    if args.netns:
        if os.geteuid() != 0:
            die("--netns needs root (ip netns, veth)")
        atexit.register(netns_down)
        netns_up(args)

    root = os.path.abspath(args.library)
    if not os.path.exists(os.path.join(root, "master.m3u8")):
        subprocess.run(["bash", os.path.join(REPO, "scripts", "make-demo.sh"), root], check=True)
    for tool in ("wrk", "h2load", "nginx", "h2o", "curl", "taskset", "openssl"):
        if not shutil.which(tool):
            die("%s not found (scripts/setup.sh --bench)" % tool)
    if args.perf and not shutil.which("perf"):
        die("perf not found (scripts/setup.sh --bench)")
    os.makedirs(args.out, exist_ok=True)
    if args.perf:
        os.makedirs(os.path.join(args.out, "perf"), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="he-matrix-")
    args.crt, args.key, args.pem = (os.path.join(tmp, n) for n in ("tls.crt", "tls.key", "tls.pem"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,IP:" + NETNS_SERVER_IP,
                    "-keyout", args.key, "-out", args.crt], check=True, capture_output=True)
    open(args.pem, "w").write(open(args.crt).read() + open(args.key).read())

    files = {}
    segs, pls = [], []
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)[len(root):]
            (segs if n.endswith(".ts") else pls if n.endswith(".m3u8") else []).append(p)
    segs.sort()
    pls.sort()
    for name, lst in (("segments", segs), ("playlists", pls), ("zipf", pls + segs)):
        files[name] = os.path.join(tmp, name + ".txt")
        open(files[name], "w").write("".join(p + "\n" for p in lst))
    subprocess.run("find %s -type f -exec cat {} + >/dev/null" % root, shell=True)  # page cache

    servers = args.servers.split(",")
    env = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kernel": os.uname().release,
           "cpu": next((ln.split(": ", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?"),
           "ncpu": os.cpu_count(), "loadavg": open("/proc/loadavg").read().split()[:3],
           "nginx": subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip(),
           "h2o": subprocess.run(["h2o", "--version"], capture_output=True, text=True).stdout.split("\n")[0],
           "congestion_control": open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip(),
           "rt": bool(args.rt), "netns": args.netns, "runs": args.runs, "duration_s": args.duration, "servers": servers,
           "builds": args.builds,
           "git": subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                                 text=True).stdout.strip()}
    json.dump(env, open(os.path.join(args.out, "env.json"), "w"), indent=1)
    log("env: %s" % env)
    raw = open(os.path.join(args.out, "raw.jsonl"), "a")
    results = []
    try:
        for tls in args.tls.split(","):
            args.tls_on = tls == "1"
            running = []
            origin = None
            try:  # whatever started is stopped, also when one fails to start
                if any(base_name(n) in CACHES for n in servers):
                    origin = start_origin(args, tmp, root)
                for i, name in enumerate(servers):
                    if name.startswith("varnish") and args.tls_on:
                        continue  # Varnish has no TLS of its own
                    port = args.base_port + i
                    if not port_free(args.addr, port) or (args.tls_on and name.startswith("hlsedge") and
                                                          not port_free(args.addr, port + 1000)):
                        die("port %d is in use" % port)
                    s = start_server(name, port, args, tmp, root)
                    running.append(s)
                for s in running:
                    s.wait_ready()
                    s.check(root, segs[0], pls[1])
                    s.cipher = s.negotiated()
                    if s.cipher:
                        log("%s negotiates %s" % (s.name, s.cipher))
                        env.setdefault("ciphers", {})[s.name] = s.cipher
                json.dump(env, open(os.path.join(args.out, "env.json"), "w"), indent=1)
                if len(set(s.cipher for s in running)) > 1:
                    die("the servers negotiate different suites: %s" %
                        ", ".join("%s %s" % (s.name, s.cipher) for s in running))
                    if base_name(s.name) in CACHES:  # every object a RAM hit
                        subprocess.run(["curl", "-sk", "--max-time", "60"] + sum(
                            (["-o", "/dev/null", "%s://%s:%d%s" % (s.scheme(), args.addr, s.port, p)] for p in pls + segs), []),
                            check=True)
                for client in args.clients.split(","):
                    for content in args.content.split(","):
                        if not cell_ok(client, content, args.tls_on):
                            continue
                        cell = "%s %s %s" % (client, content, "https" if args.tls_on else "http")
                        # misses: only the servers in front of the origin
                        cell_servers = [s for s in running if content != "cold" or base_name(s.name) in CACHES]
                        if not cell_servers:
                            continue
                        run_files = lambda s, tag: (dict(files, cold=cold_paths(
                            tmp, segs, "%s-%d-%s" % ("https" if args.tls_on else "http", s.port, tag)))
                            if content == "cold" else files)
                        for s in cell_servers:
                            if args.warmup:
                                run_client(client, content, s, args, run_files(s, "w%s" % client), args.warmup)
                        per = {s.name: [] for s in cell_servers}
                        for run in range(args.runs):
                            order = cell_servers[run % len(cell_servers):] + cell_servers[:run % len(cell_servers)]
                            for s in order:
                                r = measure(client, content, s, args, run_files(s, "%s%d" % (client, run)), run)
                                r.update(cell=cell, server=s.name, run=run, cipher=s.cipher)
                                if args.perf:
                                    json.dump(dict(r, server_pids=s.pids(), server_cpu=args.server_cpu,
                                                   client_cpu=args.client_cpu),
                                              open(perf_path(args, client, content, s, run) + ".json", "w"))
                                raw.write(json.dumps(r) + "\n")
                                raw.flush()
                                per[s.name].append(r)
                                log("%s %s run %d: %.3f GB/CPU-s, %.0f req/CPU-s, p99 %.1f ms, busy %.2f, "
                                    "client %.2f, %.3f GB/both-CPU-s, err %d; per 1k responses: "
                                    "IPIs to server CPU %.0f, to client CPU %.0f, read/write calls %.0f, "
                                    "sleeps %.0f" %
                                    (cell, s.name, run, r["gb_per_cpu_s"], r["req_per_cpu_s"], r["p99_ms"],
                                     r["busy"], r["client_busy"], r["gb_per_both_cpu_s"], r["errors"],
                                     r["ipi_server_cpu_per_kreq"], r["ipi_client_cpu_per_kreq"],
                                     r["syscalls_per_kreq"], r["sleeps_per_kreq"]) +
                                    ("; %.1f KB per packet sent, %.2f packets in per MB" %
                                     (r["kb_per_tx_packet"], r["rx_packets_per_mb"]) if "kb_per_tx_packet" in r else ""))
                        results.append((cell, per))
            finally:
                for s in running:
                    s.stop()
                if origin:
                    origin.terminate()
                    origin.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, env, os.path.join(args.out, "results.md"))
    print(open(os.path.join(args.out, "results.md")).read())


def report(results, env, path):
    def med(rs, k):
        v = [r[k] for r in rs if r[k] == r[k]]
        return (statistics.median(v), min(v), max(v)) if v else (float("nan"),) * 3

    out = ["# peer matrix %s, %s (%d CPUs), kernel %s, git %s" % (env["date"], env["cpu"], env["ncpu"],
                                                                env["kernel"], env["git"]),
           "", "Medians of %d runs of %d s (min-max); GB and requests per server CPU-second; "
               "busy = share of the server CPU busy, client = of the client's; GB/both-CPU-s: "
               "bytes per busy second of the two CPUs together.%s" % (
                   env["runs"], env["duration_s"],
                   " The client in a network namespace behind a veth pair, each side's receive on its "
                   "own CPU (--netns)." if env.get("netns") else " Over loopback.") + (
                   " TCP congestion control: %s." % env["congestion_control"]
                   if env.get("congestion_control") else ""), "",
           ] + (["TLS suite each server negotiates with OpenSSL's default client offer: " +
                 ", ".join("%s %s" % kv for kv in env["ciphers"].items()) + ".", ""] if env.get("ciphers") else []) + [
           "| cell | server | GB/CPU-s | req/CPU-s | KB/resp | p99 ms | busy | client | GB/both-CPU-s | errors "
           "| hlsedge / this |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cell, per in results:
        playlists = " playlists " in cell
        key = "req_per_cpu_s" if playlists else "gb_per_cpu_s"
        he = [n for n in per if n.startswith("hlsedge")]
        he_med = med(per[he[0]], key)[0] if he else float("nan")
        for name, rs in per.items():
            g, r_, p, b = med(rs, "gb_per_cpu_s"), med(rs, "req_per_cpu_s"), med(rs, "p99_ms"), med(rs, "busy")
            cb, gb2 = med(rs, "client_busy"), med(rs, "gb_per_both_cpu_s")
            # the mix of responses each server was asked for: under
            # `linerate` it follows how the server shares its bandwidth
            kb = statistics.median([x["bytes"] / x["requests"] / 1e3 for x in rs if x["requests"]] or [0])
            mine = med(rs, key)[0]
            ratio = "" if name.startswith("hlsedge") else "%.2f" % (he_med / mine if mine else float("nan"))
            out.append("| %s | %s | %.3f (%.3f-%.3f) | %.0f (%.0f-%.0f) | %.0f | %.1f | %.2f | %.2f | %.3f | %d | %s |" %
                       (cell, name, g[0], g[1], g[2], r_[0], r_[1], r_[2], kb, p[0], b[0], cb[0], gb2[0],
                        sum(x["errors"] for x in rs), ratio))
    open(path, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
