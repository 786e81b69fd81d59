"""The command line: -t checks a file, errors point at file:line:col and
exit 2 before anything binds, and the built-in defaults need no file."""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from he import BIN, SRC, expect, expect_eq, run_tests  # noqa: E402

TMP = tempfile.mkdtemp(prefix="he-cli-")


def write(name, text):
    p = os.path.join(TMP, name)
    with open(p, "w") as f:
        f.write(text)
    return p


def run(*args):
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=20)


def test_check_shipped_config():
    r = run("-t", "-c", os.path.join(SRC, "conf", "hlsedge.yaml"))
    expect_eq(r.returncode, 0, r.stderr)
    expect("valid" in r.stdout, r.stdout)


def test_check_defaults():
    r = run("-t")
    expect_eq(r.returncode, 0, r.stderr)


def test_error_points_at_line_and_column():
    p = write("bad.yaml", "listen: [\"127.0.0.1:8080\"]\nroot: /tmp\nworkers: lots\n")
    r = run("-t", "-c", p)
    expect_eq(r.returncode, 2)
    expect_eq(r.stderr.strip(), '%s:3:10: workers: expected a positive integer or "auto", got "lots"' % p)


def test_unknown_key_is_an_error():
    p = write("unknown.yaml", "limits:\n  max_conections: 10\n")
    r = run("-t", "-c", p)
    expect_eq(r.returncode, 2)
    expect(r.stderr.startswith("%s:2:3: " % p) and "max_conections" in r.stderr, r.stderr)


def test_bad_config_never_binds():
    import socket
    from he import free_port
    port = free_port()
    p = write("nobind.yaml", "listen: [\"127.0.0.1:%d\"]\ntimeouts:\n  header: soon\n" % port)
    r = run("-c", p)
    expect_eq(r.returncode, 2)
    expect(":3:" in r.stderr and "header" in r.stderr, r.stderr)
    s = socket.socket()
    expect(s.connect_ex(("127.0.0.1", port)) != 0, "nothing listens")
    s.close()


def test_missing_file_and_root():
    r = run("-t", "-c", os.path.join(TMP, "absent.yaml"))
    expect_eq(r.returncode, 2)
    expect("absent.yaml" in r.stderr, r.stderr)
    from he import free_port
    p = write("noroot.yaml", "listen: [\"127.0.0.1:%d\"]\nroot: %s/none\n" % (free_port(), TMP))
    r = run("-c", p)
    expect_eq(r.returncode, 1)
    expect("root %s/none" % TMP in r.stderr, r.stderr)


def test_usage():
    r = run("-x")
    expect_eq(r.returncode, 2)
    expect("usage" in r.stderr, r.stderr)
    r = run("-V")
    expect_eq(r.returncode, 0)
    expect(r.stdout.startswith("hlsedge "), r.stdout)


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
