"""testssl.sh (Debian package testssl.sh) against the TLS listener: no
SSLv2/SSLv3/TLS 1.0/TLS 1.1, no weak cipher class, forward secrecy, and
no vulnerability flagged. Asserts on its JSON output. Exit 77 (skipped)
where testssl is not installed.

Limited to what is asserted: -p (protocols), -s (cipher classes), -f
(forward secrecy), -U (every vulnerability check). That takes about 30 s
here; the full default run (-e per-cipher, server defaults, headers, client
simulation) takes several minutes and asserts nothing more."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from he import Server, expect, expect_eq, make_library, run_main  # noqa: E402

TESTSSL = shutil.which("testssl") or shutil.which("testssl.sh")
TMP = tempfile.mkdtemp(prefix="he-testssl-")
ROOT = make_library(os.path.join(TMP, "lib"), big_mb=1)
BAD = {"LOW", "MEDIUM", "HIGH", "CRITICAL"}
# WARN is about the scan itself, not the server: allowed only for these.
SCAN_WARNINGS = {"engine_problem"}


def scan(port, extra_args=()):
    out = os.path.join(TMP, "testssl-%d.json" % port)
    t0 = time.time()
    r = subprocess.run([TESTSSL, "-p", "-s", "-f", "-U", "--jsonfile", out, "--quiet", "--color", "0",
                        "--warnings", "off", "--connect-timeout", "10", "--openssl-timeout", "10",
                        *extra_args, "127.0.0.1:%d" % port],
                       capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    print("  testssl took %.1f s (exit %d)" % (time.time() - t0, r.returncode), flush=True)
    with open(out) as f:
        findings = json.load(f)
    return {x["id"]: x for x in findings}, findings, r


def check(findings_by_id, findings):
    def finding(i):
        expect(i in findings_by_id, "testssl reported no %s" % i)
        return findings_by_id[i]["finding"]

    for p in ("SSLv2", "SSLv3", "TLS1", "TLS1_1"):
        expect(finding(p).startswith("not offered"), "%s: %s" % (p, finding(p)))
    expect(finding("TLS1_2").startswith("offered"), "TLS1_2: " + finding("TLS1_2"))
    expect(finding("TLS1_3").startswith("offered"), "TLS1_3: " + finding("TLS1_3"))
    for c in ("cipherlist_NULL", "cipherlist_aNULL", "cipherlist_EXPORT", "cipherlist_LOW",
              "cipherlist_3DES_IDEA", "cipherlist_AVERAGE"):
        expect(finding(c).startswith("not offered"), "%s: %s" % (c, finding(c)))
    expect(finding("cipherlist_STRONG").startswith("offered"), "strong ciphers offered")
    expect_eq(findings_by_id["PFS"]["severity"], "OK", "forward secrecy")
    expect(finding("PFS").startswith("offered"), "PFS: " + finding("PFS"))
    for v in ("heartbleed", "CCS", "ticketbleed", "ROBOT", "secure_renego", "secure_client_renego", "CRIME_TLS",
              "BREACH", "POODLE_SSL", "fallback_SCSV", "SWEET32", "FREAK", "DROWN", "LOGJAM", "BEAST", "LUCKY13",
              "RC4"):
        expect(v in findings_by_id, "vulnerability check %s ran" % v)
        expect_eq(findings_by_id[v]["severity"], "OK", "%s: %s" % (v, findings_by_id[v]["finding"]))
    bad = [x for x in findings if x["severity"] in BAD or
           (x["severity"] == "WARN" and x["id"] not in SCAN_WARNINGS) or x["severity"] == "FATAL"]
    expect(not bad, "findings flagged: %s" % json.dumps(bad, indent=1))


def test_testssl_rsa_default_certificate():
    with Server(ROOT, tls=True, workers=2) as srv:
        by_id, findings, _ = scan(srv.port)
        check(by_id, findings)


def main():
    if not TESTSSL:
        print("testssl not installed (apt-get install testssl.sh): skipped")
        return 77
    return run_main(globals(), TMP)


if __name__ == "__main__":
    sys.exit(main())
