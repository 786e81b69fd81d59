#!/usr/bin/env bash
# Two hlsedge binaries side by side on the data-path benchmark
# (tests/bench/vs-nginx.sh with SERVERS=hlsedge): A and B alternate, round
# after round, each first in every other round, in one run, and the
# medians per phase with their spread and the B/A ratio are printed. For
# "does this change cost anything": build the old commit somewhere, then
#
#   A=/tmp/old/hlsedge B=build/hlsedge ROUNDS=5 bash tests/bench/ab-builds.sh
#
# Environment: A, B (binaries), ROUNDS=5, and whatever vs-nginx.sh takes
# (DURATION, WARMUP, CONNS, TLS, PHASES, SERVER_CPU, CLIENT_CPU ...). Figures per
# phase: requests and bytes per server CPU-second (process CPU from /proc),
# p99 latency. Loopback only; every wrk run is bounded.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
A=${A:?A=path of the first hlsedge binary}
B=${B:?B=path of the second hlsedge binary}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-var/bench/ab-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
[ -x "$A" ] && [ -x "$B" ] || { echo "ab-builds: A and B must be executables" >&2; exit 2; }

for r in $(seq 1 "$ROUNDS"); do
    # the second of a round ran slower than the first: two builds whose
    # playlist path is the same read 0.92 with one first and 0.98 with the
    # other. A goes first in odd rounds, B in even ones.
    order="A B"
    [ $((r % 2)) = 0 ] && order="B A"
    for side in $order; do
        bin=$A
        [ "$side" = B ] && bin=$B
        echo "ab-builds: round $r/$ROUNDS: $side ($bin)" >&2
        SERVERS=hlsedge HLSEDGE="$bin" OUT="$OUT/$side-$r" bash tests/bench/vs-nginx.sh \
            >"$OUT/$side-$r.log" 2>&1 || { tail -n 20 "$OUT/$side-$r.log" >&2; exit 1; }
    done
done

python3 - "$OUT" "$ROUNDS" "$(getconf CLK_TCK)" <<'PY' | tee "$OUT/summary.txt"
import os, statistics, sys
out, rounds, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = {}  # (side, phase) -> list of dicts
for side in "AB":
    for r in range(1, rounds + 1):
        for line in open(os.path.join(out, f"{side}-{r}", "raw.tsv")):
            f = line.rstrip("\n").split("\t")
            kv = dict(x.split("=", 1) for x in " ".join(f[2:]).split() if "=" in x)
            cpu = int(kv["cpu_ticks"]) / tck
            rows.setdefault((side, f[1]), []).append({
                "req_per_cpu_s": int(kv["requests"]) / cpu,
                "gb_per_cpu_s": int(kv["bytes"]) / cpu / 1e9,
                "p99_ms": int(kv["p99_us"]) / 1000,
            })
print(f"{rounds} rounds, A and B alternating; median (min-max)")
for phase in sorted({p for _, p in rows}):
    for fig in ("req_per_cpu_s", "gb_per_cpu_s", "p99_ms"):
        line = f"{phase:10s} {fig:14s}"
        med = {}
        for side in "AB":
            v = [x[fig] for x in rows[(side, phase)]]
            med[side] = statistics.median(v)
            line += f"  {side} {med[side]:10.3f} ({min(v):.3f}-{max(v):.3f})"
        line += f"  B/A {med['B'] / med['A']:.3f}" if med["A"] else ""
        print(line)
PY
