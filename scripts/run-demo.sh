#!/usr/bin/env bash
# One command from a fresh Debian 12 to a running server:
# installs dependencies, builds, makes the demo HLS library (demo/library),
# then serves it with the default configuration on 0.0.0.0:8080.
#
#   sudo bash scripts/run-demo.sh
#   ffplay http://127.0.0.1:8080/master.m3u8      (or any HLS player)
#
#   sudo bash scripts/run-demo.sh --live
# also publishes a live Low-Latency HLS stream (1 s parts, 4 s segments,
# two renditions; scripts/ll-source.py) into demo/library/live while the
# server runs: http://127.0.0.1:8080/live/master.m3u8, and the same stream
# as plain live HLS at /live/master-plain.m3u8.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

live=0
for arg in "$@"; do
  case "$arg" in
    --live) live=1 ;;
    *) echo "usage: $0 [--live]" >&2; exit 2 ;;
  esac
done

bash scripts/setup.sh
bash scripts/build.sh
bash scripts/make-demo.sh demo/library

echo
echo "Master playlist: http://127.0.0.1:8080/master.m3u8"
if [ "$live" = 0 ]; then
  echo
  # The default configuration serves root demo/library relative to the cwd.
  exec build/hlsedge
fi

mkdir -p demo/library/live var/cache
python3 scripts/ll-source.py --dir demo/library/live --work var/cache/ll-source &
source_pid=$!
trap 'kill "$source_pid" 2>/dev/null; wait "$source_pid" 2>/dev/null || true' EXIT
# the source encodes its clip first (a few seconds), then writes the master
for _ in $(seq 1 120); do
  [ -e demo/library/live/master.m3u8 ] && break
  kill -0 "$source_pid" 2>/dev/null || { echo "the live source failed" >&2; exit 1; }
  sleep 0.5
done
echo "Low-latency live:  http://127.0.0.1:8080/live/master.m3u8"
echo "Plain live (same): http://127.0.0.1:8080/live/master-plain.m3u8"
echo "  (hls.js: new Hls({lowLatencyMode: true}))"
echo
build/hlsedge
