"""A veth pair from this network namespace into a new one, for benchmarks
that need a link rather than loopback (matrix.py --netns,
tls-first-record.py). Needs root."""
import subprocess


def sh(*cmd, check=True):
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


def pair_down(ns, near_if):
    sh("ip", "link", "del", near_if, check=False)
    sh("ip", "netns", "del", ns, check=False)


def pair_up(ns, near_if, far_if, near_ip, far_ip):
    """Namespace ns with far_if (far_ip/24) and its loopback up; near_if
    (near_ip/24) stays here. Returns the prefix that runs a command in ns."""
    pair_down(ns, near_if)
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", near_if, "type", "veth", "peer", "name", far_if)
    sh("ip", "link", "set", far_if, "netns", ns)
    sh("ip", "addr", "add", near_ip + "/24", "dev", near_if)
    sh("ip", "link", "set", near_if, "up")
    inns = ["ip", "netns", "exec", ns]
    sh(*inns, "ip", "addr", "add", far_ip + "/24", "dev", far_if)
    sh(*inns, "ip", "link", "set", far_if, "up")
    sh(*inns, "ip", "link", "set", "lo", "up")
    return inns
