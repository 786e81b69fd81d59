#!/usr/bin/env bash
# One command from a fresh Debian 12 to a running server:
# installs dependencies, builds, makes the demo HLS library (demo/library),
# then serves it with the default configuration on 0.0.0.0:8080.
#
#   sudo bash scripts/run-demo.sh
#   ffplay http://127.0.0.1:8080/master.m3u8      (or any HLS player)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
bash scripts/build.sh
bash scripts/make-demo.sh demo/library

echo
echo "Master playlist: http://127.0.0.1:8080/master.m3u8"
echo
# The default configuration serves root demo/library relative to the cwd.
exec build/hlsedge
