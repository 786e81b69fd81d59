#!/usr/bin/env bash
# Installs what hlsedge needs to build, test and benchmark on Debian 12.
# Idempotent: when every package is already installed it only runs one
# dpkg-query and exits. Run as root (or via sudo).
#
#   bash scripts/setup.sh           build + test dependencies
#   bash scripts/setup.sh --bench   ... plus linux-perf (tests/bench/vs-nginx.sh PERF=1)
#   bash scripts/setup.sh --ktls-vm ... plus QEMU and a static busybox, for the kTLS test in a VM
#                                   (tests/integration/test_ktls_vm.py; skipped without them)
set -euo pipefail

BUILD_PKGS=(build-essential cmake pkg-config liburing-dev libuv1-dev libssl-dev
            libnuma-dev libyaml-dev node-llhttp clang python3
            libnghttp2-dev)
TEST_PKGS=(curl ffmpeg openssl nginx wrk procps testssl.sh prometheus chromium
           nghttp2-client python3-h2)
# beyond one box: the HAProxy front, network namespaces for the cluster
# test, the Debian package build (tests/integration/test_cluster_netns.py,
# test_deb.py)
TEST_PKGS+=(haproxy iproute2 util-linux debhelper dpkg-dev fakeroot adduser)
# hostile clients: slowloris, slow body, slow read, range attack
# (tests/integration/test_hostile.py)
TEST_PKGS+=(slowhttptest)
BENCH_PKGS=(linux-perf)
KTLS_VM_PKGS=(qemu-system-x86 busybox-static)

want=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}")
for arg in "$@"; do
    case "$arg" in
        --bench) want+=("${BENCH_PKGS[@]}") ;;
        --ktls-vm) want+=("${KTLS_VM_PKGS[@]}") ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "setup.sh: unknown option: $arg" >&2; exit 2 ;;
    esac
done

# One dpkg-query for all packages; anything not "installed" is missing.
missing=()
status=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${want[@]}" 2>/dev/null || true)
for p in "${want[@]}"; do
    if ! grep -qx "$p installed" <<<"$status"; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#want[@]} packages present"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run as root (sudo bash scripts/setup.sh) to install them" >&2
    exit 1
fi

echo "setup: installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts nginx on :80 after install; the benchmark runs its own.
if [[ " ${missing[*]} " == *" nginx "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now nginx >/dev/null 2>&1 || true
fi
echo "setup: done"
