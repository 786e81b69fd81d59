#!/usr/bin/env bash
# Configures and builds hlsedge (RelWithDebInfo) with all cores.
#
#   bash scripts/build.sh           -> build/       (build/hlsedge)
#   bash scripts/build.sh --asan    -> build-asan/  (-DHE_SANITIZE=ON: ASan + UBSan)
#   bash scripts/build.sh -- -DFOO=BAR    extra arguments after -- go to cmake
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir=build
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
while [ $# -gt 0 ]; do
    case "$1" in
        --asan) dir=build-asan; cmake_args+=(-DHE_SANITIZE=ON) ;;
        --) shift; cmake_args+=("$@"); break ;;
        -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown option: $1" >&2; exit 2 ;;
    esac
    shift
done

cmake -S . -B "$dir" "${cmake_args[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
echo "build: $dir ok"
