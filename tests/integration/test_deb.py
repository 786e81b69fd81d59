"""The Debian package, built and installed for real: dpkg-buildpackage -b
-us -uc on a copy of the tracked sources (or the .deb of an earlier run,
reused while no tracked file is newer; HE_DEB names one to use), dpkg -i
on this machine, the installed binary started with the installed
configuration as the package's own user inside a network namespace of
its own (so its :8080 and :9090 meet nothing else), the demo master
fetched, SIGUSR1 and SIGTERM, then dpkg --purge, which must leave nothing
behind. Skips (77) without root, dpkg-buildpackage or ip netns, and when
an hlsedge package is already installed (never replaced by a test)."""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import expect, expect_eq, run_main  # noqa: E402

SRC = os.environ.get("HE_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("HE_BUILD") or os.path.join(SRC, "build")
TMP = tempfile.mkdtemp(prefix="he-deb-")
NS = "hedeb%d" % (os.getpid() % 100000)
LIB = "/var/lib/hlsedge/library"


def sh(*cmd, timeout=120, check=True, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError("%s: rc %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def skip(why):
    print("SKIP: %s" % why, flush=True)
    sys.exit(77)


def tracked_mtime():
    files = sh("git", "-C", SRC, "ls-files", "-z").stdout.split("\0")
    return max(os.stat(os.path.join(SRC, f)).st_mtime for f in files if f and os.path.exists(os.path.join(SRC, f)))


def the_deb():
    if os.environ.get("HE_DEB"):
        return os.environ["HE_DEB"]
    out = os.path.join(BUILD, "deb")
    old = sorted(glob.glob(os.path.join(out, "hlsedge_*.deb")))
    if old and os.stat(old[-1]).st_mtime > tracked_mtime():
        print("reusing %s" % old[-1], flush=True)
        return old[-1]
    src = os.path.join(TMP, "src", "hlsedge")
    os.makedirs(src)
    files = sh("git", "-C", SRC, "ls-files", "-z").stdout
    subprocess.run(["tar", "-C", SRC, "--null", "-T", "-", "-cf", os.path.join(TMP, "src.tar")],
                   input=files, text=True, check=True, timeout=120)
    sh("tar", "-C", src, "-xf", os.path.join(TMP, "src.tar"))
    t0 = time.time()
    r = sh("dpkg-buildpackage", "-b", "-us", "-uc", timeout=1200, check=False, cwd=src)
    expect(r.returncode == 0, "dpkg-buildpackage failed:\n" + (r.stdout + r.stderr)[-4000:])
    print("dpkg-buildpackage: %.0f s" % (time.time() - t0), flush=True)
    debs = glob.glob(os.path.join(TMP, "src", "hlsedge_*.deb"))
    expect_eq(len(debs), 1, "one hlsedge .deb: %s" % debs)
    os.makedirs(out, exist_ok=True)
    for d in glob.glob(os.path.join(out, "hlsedge_*.deb")):
        os.unlink(d)
    dst = os.path.join(out, os.path.basename(debs[0]))
    shutil.copy(debs[0], dst)
    return dst


def test_build_install_run_purge():
    deb = the_deb()
    contents = sh("dpkg-deb", "-c", deb).stdout
    for f in ("./usr/sbin/hlsedge", "./usr/sbin/hlsedge-loadgen", "./etc/hlsedge/hlsedge.yaml",
              "./lib/systemd/system/hlsedge.service", "./etc/logrotate.d/hlsedge",
              "./usr/share/hlsedge/dashboard.html"):
        expect(f in contents, "%s in the package" % f)
    sh("dpkg", "-i", deb, timeout=300)
    try:
        conffiles = sh("dpkg-query", "-W", "-f=${Conffiles}", "hlsedge").stdout
        expect("/etc/hlsedge/hlsedge.yaml" in conffiles, "the configuration is a conffile: " + conffiles)
        expect(sh("getent", "passwd", "hlsedge", check=False).returncode == 0, "the hlsedge user")
        with open("/lib/systemd/system/hlsedge.service") as f:
            unit = f.read()
        for line in ("ExecReload=/bin/kill -HUP $MAINPID", "User=hlsedge", "ProtectSystem=strict",
                     "AmbientCapabilities=CAP_NET_BIND_SERVICE",
                     "CapabilityBoundingSet=CAP_NET_BIND_SERVICE", "LimitNOFILE="):
            expect(line in unit, "unit has " + line)
        if shutil.which("systemd-analyze"):
            r = sh("systemd-analyze", "verify", "/lib/systemd/system/hlsedge.service", check=False)
            expect(r.returncode == 0 or "Failed to" not in r.stderr, "systemd-analyze verify:\n" + r.stderr)
        sh("/usr/sbin/hlsedge", "-t", "-c", "/etc/hlsedge/hlsedge.yaml")

        # the demo master and one rendition where the installed config looks
        demo = os.path.join(SRC, "demo", "library")
        if not os.path.exists(os.path.join(demo, "master.m3u8")):
            sh("bash", os.path.join(SRC, "scripts", "make-demo.sh"), demo, timeout=900)
        os.makedirs(LIB, exist_ok=True)
        shutil.copy(os.path.join(demo, "master.m3u8"), LIB)
        shutil.copytree(os.path.join(demo, "288p"), os.path.join(LIB, "288p"))
        sh("chown", "-R", "hlsedge:hlsedge", LIB)

        sh("ip", "netns", "add", NS)
        try:
            sh("ip", "-n", NS, "link", "set", "lo", "up")
            # as a box without systemd runs it: the installed binary and
            # config, the package's user
            p = subprocess.Popen(["ip", "netns", "exec", NS, "setpriv", "--reuid=hlsedge", "--regid=hlsedge",
                                  "--init-groups", "/usr/sbin/hlsedge", "-c", "/etc/hlsedge/hlsedge.yaml"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                body = None
                for _ in range(100):
                    r = sh("ip", "netns", "exec", NS, "curl", "-sf", "http://127.0.0.1:8080/master.m3u8",
                           check=False, timeout=10)
                    if r.returncode == 0:
                        body = r.stdout
                        break
                    expect(p.poll() is None, "hlsedge exited")
                    time.sleep(0.1)
                with open(os.path.join(demo, "master.m3u8")) as f:
                    expect_eq(body, f.read(), "the demo master through the installed server")
                r = sh("ip", "netns", "exec", NS, "curl", "-sf", "http://127.0.0.1:9090/healthz", timeout=10)
                expect_eq(r.stdout, "ok\n")
                p.send_signal(10)  # SIGUSR1: what logrotate sends
                time.sleep(0.3)
                expect(p.poll() is None, "alive after SIGUSR1")
                for _ in range(50):
                    if os.path.exists("/var/log/hlsedge/access.log") and \
                            "master.m3u8" in open("/var/log/hlsedge/access.log").read():
                        break
                    time.sleep(0.1)
                expect("master.m3u8" in open("/var/log/hlsedge/access.log").read(), "access log written")
                expect_eq(os.stat("/var/log/hlsedge/access.log").st_uid,
                          int(sh("id", "-u", "hlsedge").stdout), "written as hlsedge")
                p.terminate()
                out, _ = p.communicate(timeout=60)
                expect_eq(p.returncode, 0, "clean exit on SIGTERM:\n" + out[-2000:])
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        finally:
            sh("ip", "netns", "del", NS, check=False)
    finally:
        shutil.rmtree(LIB, ignore_errors=True)
        sh("dpkg", "--purge", "hlsedge", timeout=300)
    for f in ("/usr/sbin/hlsedge", "/usr/sbin/hlsedge-loadgen", "/etc/hlsedge/hlsedge.yaml",
              "/lib/systemd/system/hlsedge.service", "/etc/logrotate.d/hlsedge", "/var/log/hlsedge",
              "/var/lib/hlsedge", "/usr/share/hlsedge"):
        expect(not os.path.exists(f), "%s removed by purge" % f)
    expect(sh("getent", "passwd", "hlsedge", check=False).returncode != 0, "the user removed by purge")


if __name__ == "__main__":
    if os.geteuid() != 0:
        skip("needs root (dpkg -i and ip netns)")
    for tool in ("dpkg-buildpackage", "dh", "ip", "setpriv", "curl"):
        if not shutil.which(tool):
            skip("%s is not installed (scripts/setup.sh installs it)" % tool)
    if sh("dpkg-query", "-W", "-f=${db:Status-Status}", "hlsedge", check=False).stdout == "installed":
        skip("an hlsedge package is installed on this machine: not replaced by a test")
    r = sh("ip", "netns", "add", NS + "x", check=False)
    if r.returncode != 0:
        skip("network namespaces are not allowed here: " + r.stderr.strip())
    sh("ip", "netns", "del", NS + "x", check=False)
    sys.exit(run_main(globals(), TMP))
