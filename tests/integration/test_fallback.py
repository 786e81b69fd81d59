"""The same HTTP, bad-input and connection suites with every optional
kernel feature turned off (features.disable: all, through he.py's
HE_TEST_DISABLE_FEATURES): single-shot accept
and recv without a buffer ring, plain file descriptors, no DEFER_TASKRUN,
no openat2 (the /proc check keeps symlinks inside root), no CPU steering.
The server must behave the same on old kernels."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    env = dict(os.environ, HE_TEST_DISABLE_FEATURES="all")
    failed = 0
    for suite in ("test_http.py", "test_badinput.py", "test_conns.py"):
        print("== %s with features.disable: all" % suite, flush=True)
        rc = subprocess.run([sys.executable, os.path.join(HERE, suite)], env=env, timeout=500).returncode
        failed += rc != 0
    print("%d passed, %d failed" % (3 - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
