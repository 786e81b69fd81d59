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
            libnghttp2-dev zlib1g-dev)
TEST_PKGS=(curl ffmpeg openssl nginx wrk procps testssl.sh prometheus chromium
           nghttp2-client python3-h2)
# beyond one box: the HAProxy front, network namespaces for the cluster
# test, the Debian package build (tests/integration/test_cluster_netns.py,
# test_deb.py)
TEST_PKGS+=(haproxy iproute2 util-linux debhelper dpkg-dev fakeroot adduser)
# hostile clients: slowloris, slow body, slow read, range attack
# (tests/integration/test_hostile.py)
TEST_PKGS+=(slowhttptest)
# npm for hls.js (install_hlsjs below), unless one is there already (a
# nodejs from elsewhere ships its own, and Debian's npm would conflict)
command -v npm >/dev/null || TEST_PKGS+=(npm)
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

# hls.js (npm) for the player tests (tests/integration/he_player.py), into
# var/cache/hlsjs, which git ignores; he_player.py installs it the same way
# when this has not, and the tests skip when npm cannot reach the registry.
install_hlsjs() {
    local dir js
    dir="$(cd "$(dirname "$0")/.." && pwd)/var/cache/hlsjs"
    js="$dir/node_modules/hls.js/dist/hls.min.js"
    [ -f "$js" ] && return 0
    command -v npm >/dev/null || return 0
    mkdir -p "$dir"
    if timeout 120 npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error "hls.js@${HE_HLSJS_VERSION:-1}" >/dev/null; then
        echo "setup: hls.js in $dir"
    else
        echo "setup: npm could not install hls.js; the player tests will skip" >&2
    fi
}

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
    install_hlsjs
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
install_hlsjs
echo "setup: done"
