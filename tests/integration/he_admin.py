"""Helpers for tests of the admin listener: GET /stats and /metrics, parse
the Prometheus text, wait for counters to settle."""

import json
import re
import signal
import socket
import time

from he import Conn


def admin_get(srv, path, method="GET"):
    c = Conn(srv.admin_port, tls=False)  # the admin listener is plain HTTP under HE_TLS too
    try:
        return c.request(method, path)
    finally:
        c.close()


def stats(srv):
    r = admin_get(srv, "/stats")
    if r.status != 200:
        raise AssertionError("/stats answered %d" % r.status)
    return json.loads(r.body)


def metrics_text(srv):
    r = admin_get(srv, "/metrics")
    if r.status != 200:
        raise AssertionError("/metrics answered %d" % r.status)
    return r.body.decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, float)] for every sample line."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise AssertionError("not a sample line: %r" % line)
        labels = dict(LABEL.findall(m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def metric_sum(samples, name, **labels):
    """Sum of a metric over the samples matching labels (e.g. over workers)."""
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items()))


def wait_for(pred, timeout=5.0, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def reload_and_wait(srv, generation, timeout=10):
    """SIGHUP, then wait until /stats reports configuration generation."""
    srv.signal(signal.SIGHUP)
    return wait_for(lambda: stats(srv)["config"]["generation"] == generation, timeout,
                    "configuration generation %d" % generation)


def port_refuses(port, host="127.0.0.1"):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return False
    except OSError:
        return True
