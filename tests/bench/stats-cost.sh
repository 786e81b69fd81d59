#!/usr/bin/env bash
# What statistics and the access log cost per request, measured like
# tests/bench/vs-nginx.sh: hlsedge with ONE worker, the whole process pinned
# to one CPU (so the control thread, which formats and writes the access
# log, is charged too), wrk pinned to another, requesting random playlists
# (the cheapest requests, so fixed per-request costs show most); the
# figure is CPU time per request. Modes:
#   base   stats.latency: false: no latency histograms, no access log
#   stats  latency histograms (the default), no access log
#   alog   histograms + access log, combined format, to a file
#   json   histograms + access log, JSON lines, to a file
# (the counters that existed before, such as requests by status class,
# are in every mode).
#
# On a machine that others use too, the background changes from minute to
# minute by more than the effect measured. So one server per mode runs at
# once (all on SERVER_CPU), and wrk loads them in turn, SLICE at a time,
# ROUNDS times, each round starting with the next mode: every mode sees
# the same background. Each slice is measured until 0.3 s after the load,
# so what the control thread does after it (the last records) counts.
# RUNS repeats all of it with fresh servers and takes the median of the
# runs: a process keeps its memory layout for life, which biases all its
# slices alike by a few percent, more than the access log costs.
#
# TOGGLE=1 takes that bias out for the access log: ONE server, and the log
# is switched between slices by rewriting its config and sending SIGHUP
# (states nolog, alog = combined, json; histograms on throughout), so every
# state is the same process. Each slice waits for its last log lines.
#
# Figures per slice: the time on CPU of the worker thread and of the
# control thread (and with TOGGLE=1 of the kernel's write-back threads),
# from the scheduler (/proc/PID/task/TID/schedstat, exact to the ns; the
# headline figure is the two server threads' sum), the process's utime+stime
# (sampled per tick), and the busy time of SERVER_CPU from /proc/stat
# (network softirqs run in whatever thread is on the CPU, so this one also
# catches receive work moved between threads). It prints per run the
# median over slices per mode and its cost relative to the reference mode
# (base, or nolog with TOGGLE=1), then the median of the runs.
#
#   bash tests/bench/stats-cost.sh
#   RUNS=5 ROUNDS=10 bash tests/bench/stats-cost.sh
#   TOGGLE=1 RUNS=3 ROUNDS=16 bash tests/bench/stats-cost.sh
#
# WORKLOAD=live requests, instead of playlists alone, what live viewers
# do: each segment of the demo library and as often its rendition's media
# playlist (a player reloads it once per segment), so half the requests
# are segments of 0.4-4.7 MB.
#
# CONTROL_CPU puts the control thread (control_cpus) on a CPU of its own,
# as on a box with a housekeeping CPU; here that is the client's CPU, so
# the control thread is still charged (threads, ticks) but no longer
# shares the worker's caches. By default it shares the worker's CPU.
#
# Environment: RUNS=1 ROUNDS=20 SLICE=2s CONNS=50 PORT=18090 (PORT..PORT+3,
# and PORT+10 for the admin listener with TOGGLE=1) TOGGLE=0
# SERVER_CPU=0 CLIENT_CPU=1 CONTROL_CPU=SERVER_CPU WORKLOAD=playlists
# LIBRARY=demo/library HLSEDGE=build/hlsedge
# MODES="base stats alog json" OUT=var/bench/stats-cost-<time>
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
RUNS=${RUNS:-1}
ROUNDS=${ROUNDS:-20}
SLICE=${SLICE:-2s}
CONNS=${CONNS:-50}
BASE_PORT=${PORT:-18090}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONTROL_CPU=${CONTROL_CPU:-$SERVER_CPU}
PROC_CPUS=$SERVER_CPU
[ "$CONTROL_CPU" = "$SERVER_CPU" ] || PROC_CPUS=$SERVER_CPU,$CONTROL_CPU
LIBRARY=${LIBRARY:-demo/library}
HLSEDGE=${HLSEDGE:-build/hlsedge}
MODES=${MODES:-"base stats alog json"}
WORKLOAD=${WORKLOAD:-playlists}
BENCH_NAME=stats-cost
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh # cpu_ticks, cpu_busy_ticks, port_free; it resets PORT
PORT=$BASE_PORT
OUT=${OUT:-var/bench/stats-cost-$(date +%Y%m%d-%H%M%S)}

die() { echo "stats-cost: $*" >&2; exit 1; }
for t in wrk taskset curl python3; do command -v "$t" >/dev/null || die "$t not found (scripts/setup.sh)"; done
[ -x "$HLSEDGE" ] || die "$HLSEDGE missing (scripts/build.sh)"
if [ ! -f "$LIBRARY/master.m3u8" ]; then bash scripts/make-demo.sh "$LIBRARY"; fi
ROOT=$(cd "$LIBRARY" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/hlsedge-stats-cost.XXXXXX)
declare -A PID PORTOF
cleanup() {
    local m
    for m in "${!PID[@]}"; do kill "${PID[$m]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
case $WORKLOAD in
    playlists) (cd "$ROOT" && find . -name '*.m3u8' -type f | sed 's|^\.||' | sort) >"$OUT/paths.txt" ;;
    live) # every segment and, as often, its rendition's playlist
        (cd "$ROOT" && find . -name '*.ts' -type f | sed 's|^\.||' | sort |
            while read -r s; do echo "$s"; echo "${s%/*}/index.m3u8"; done) >"$OUT/paths.txt" ;;
    *) die "WORKLOAD is playlists or live" ;;
esac
CLK_TCK=$(getconf CLK_TCK)

start() { # start MODE PORT
    local mode=$1 port=$2 conf="$TMP/$1.yaml"
    # SO_REUSEPORT would let a leftover server share the port silently
    port_free "$port" || die "port $port is in use"
    {
        echo "listen: [\"127.0.0.1:$port\"]"
        echo "workers: 1"
        echo "cpus: [$SERVER_CPU]"
        echo "control_cpus: [$CONTROL_CPU]"
        echo "root: \"$ROOT\""
        echo "limits:"
        echo "  max_connections: 4096"
        echo "admin:"
        if [ "$mode" = live ]; then echo "  listen: \"127.0.0.1:$((port + 10))\""; else echo "  listen: \"off\""; fi
        echo "log:"
        case "$mode" in
            alog) echo "  access: \"$TMP/$mode-access.log\"" ;;
            json) echo "  access: \"$TMP/$mode-access.log\""; echo "  access_format: json" ;;
            base | stats | live) echo "  access: \"\"" ;;
            *) die "unknown mode $mode" ;;
        esac
        if [ "$mode" = base ]; then echo "stats:"; echo "  latency: false"; fi
    } >"$conf"
    taskset -c "$PROC_CPUS" "$HLSEDGE" -c "$conf" >"$TMP/$mode.log" 2>&1 &
    PID[$mode]=$!
    PORTOF[$mode]=$port
    for _ in $(seq 100); do
        if curl -sf -o /dev/null "http://127.0.0.1:$port/master.m3u8"; then
            control_first "${PID[$mode]}"
            return 0
        fi
        sleep 0.1
    done
    die "hlsedge ($mode) did not start: $(tail -n 3 "$TMP/$mode.log")"
}

# On its own CPU the control thread shares it with wrk, which never
# sleeps. Under chrt -r both are round-robin at one priority: the control
# thread would wait up to a 100 ms time slice, the rings would fill and
# records drop. A box's housekeeping CPU is idle when the control thread
# wakes, so the control thread (the main thread: its TID is the PID) gets
# one priority more.
control_first() {
    local pol prio
    [ "$CONTROL_CPU" = "$SERVER_CPU" ] && return 0
    pol=$(chrt -p $$ | sed -n 's/.*policy: //p')
    prio=$(chrt -p $$ | sed -n 's/.*priority: //p')
    case $pol in
        SCHED_RR | SCHED_FIFO) chrt -r -p $((prio + 1)) "$1" >/dev/null ;;
    esac
}

load() { # load MODE DURATION -> requests
    taskset -c "$CLIENT_CPU" wrk -t 1 -c "$CONNS" -d "$2" -s tests/bench/random-paths.lua \
        "http://127.0.0.1:${PORTOF[$1]}" -- "$OUT/paths.txt" >"$TMP/wrk.txt" 2>&1 ||
        die "wrk failed: $(tail -n 3 "$TMP/wrk.txt")"
    grep '^WRK_RESULT ' "$TMP/wrk.txt" | sed 's/.*requests=\([0-9]*\).*/\1/'
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) ($(nproc) CPUs)"
    echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "workload: $WORKLOAD; modes: $MODES; $ROUNDS rounds of $SLICE per mode; wrk 1 thread, $CONNS connections on CPU $CLIENT_CPU; hlsedge worker on CPU $SERVER_CPU, control thread on CPU $CONTROL_CPU"
} | tee "$OUT/env.txt"
: >"$OUT/raw.tsv"

# Time on CPU of the worker threads and of the rest (the control thread),
# in ns, from the scheduler (/proc/PID/task/TID/schedstat): exact, where
# utime+stime are sampled per tick.
thread_ns() {
    local t w=0 c=0 ns comm
    for t in /proc/"$1"/task/*; do
        read -r ns _ <"$t/schedstat" || continue
        read -r comm <"$t/comm" || continue
        case $comm in he-worker-*) w=$((w + ns)) ;; *) c=$((c + ns)) ;; esac
    done
    echo "$w $c"
}
# The kernel's write-back of the log runs in its threads (kworker, jbd2),
# not hlsedge's: their time on CPU by PID, and the sum of what grew
# between two snapshots (threads that came or went in between are left
# out).
kthreads_snap() { # kthreads_snap FILE
    local p comm ns
    for p in /proc/[0-9]*; do
        read -r comm <"$p/comm" 2>/dev/null || continue
        case $comm in
            kworker* | jbd2*) read -r ns _ <"$p/schedstat" 2>/dev/null && echo "${p#/proc/} $ns" ;;
        esac
    done >"$1"
}
kthreads_delta() { awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { d += $2 - a[$1] } END { print d + 0 }' "$1" "$2"; }
# TOGGLE=1: one server, the access log switched by SIGHUP between slices
# (off, combined, json): the same process, so the same memory layout for
# every state. Latency histograms stay on throughout. Each slice ends with
# a sync, so the write-back of what it logged happens inside it and is
# counted (kthreads); in state nolog that is the baseline.
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
set_state() { # set_state nolog|alog|json NAME: rewrite the config, reload, settle
    # (a new file name each time, so every reload reopens the log)
    sed -i '/^  access/d' "$TMP/live.yaml"
    case $1 in
        nolog) echo '  access: ""' >>"$TMP/live.yaml" ;;
        alog) echo "  access: \"$TMP/live-$2.log\"" >>"$TMP/live.yaml" ;;
        json) printf '  access: "%s"\n  access_format: json\n' "$TMP/live-$2.log" >>"$TMP/live.yaml" ;;
    esac
    kill -HUP "${PID[live]}"
    sleep 0.7
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/master.m3u8" # the worker has taken it
}
if [ "${TOGGLE:-0}" = 1 ]; then
    [ "$MODES" = "base stats alog json" ] && MODES="nolog alog json"
    read -r -a MODELIST <<<"$MODES"
    NM=${#MODELIST[@]}
    for run in $(seq "$RUNS"); do
        start live "$PORT"
        load live 2s >/dev/null
        for r in $(seq "$ROUNDS"); do
            for k in $(seq 0 $((NM - 1))); do
                m=${MODELIST[$(((r + k) % NM))]}
                set_state "$m" "$run.$r.$m"
                l0=$(lines "$TMP/live-$run.$r.$m.log")
                drops0=$(curl -s "http://127.0.0.1:$((PORT + 10))/stats" |
                    python3 -c 'import json, sys; print(json.load(sys.stdin)["access_log"]["dropped"])')
                t0=$(cpu_ticks "${PID[live]}")
                b0=$(cpu_busy_ticks "$SERVER_CPU")
                read -r w0 c0 <<<"$(thread_ns "${PID[live]}")"
                kthreads_snap "$TMP/k0"
                req=$(load live "$SLICE")
                sleep 0.3
                # the last batch is written within the slice it belongs to
                for _ in $(seq 20); do
                    [ "$m" = nolog ] || [ $(($(lines "$TMP/live-$run.$r.$m.log") - l0)) -ge "$req" ] && break
                    sleep 0.1
                done
                t1=$(cpu_ticks "${PID[live]}")
                b1=$(cpu_busy_ticks "$SERVER_CPU")
                read -r w1 c1 <<<"$(thread_ns "${PID[live]}")"
                sync
                kthreads_snap "$TMP/k1"
                kt=$(kthreads_delta "$TMP/k0" "$TMP/k1")
                l1=$(lines "$TMP/live-$run.$r.$m.log")
                # a state that did not take would show here; records the
                # worker's ring had no room for are dropped and counted
                drops=$(curl -s "http://127.0.0.1:$((PORT + 10))/stats" |
                    python3 -c 'import json, sys; print(json.load(sys.stdin)["access_log"]["dropped"])')
                if [ "$m" = nolog ] && [ "$l1" != "$l0" ]; then die "log still on in state nolog"; fi
                if [ "$m" != nolog ] && [ $((l1 - l0 + drops - drops0)) -lt "$req" ]; then
                    die "$m: $((l1 - l0)) lines and $((drops - drops0)) drops for $req requests"
                fi
                [ "$drops" != "$drops0" ] && echo "stats-cost: $m: $((drops - drops0)) records dropped" >&2
                printf '%s\t%s\trequests=%s\tcpu_ticks=%s\tcpu_busy=%s\tworker_ns=%s\tcontrol_ns=%s\tkthreads_ns=%s\tloadavg=%s\n' \
                    "$m" "$run.$r" "$req" "$((t1 - t0))" "$((b1 - b0))" "$((w1 - w0))" "$((c1 - c0))" \
                    "$kt" "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/raw.tsv"
                # the next reload closes it. Deleted, so its page cache is
                # reused: a log that grows for minutes measures how this VM
                # backs guest memory touched for the first time (the copy
                # into new page cache then costs 5x), not hlsedge.
                rm -f "$TMP/live-$run.$r.$m.log"
            done
        done
        kill "${PID[live]}"
        wait "${PID[live]}" 2>/dev/null || true
        unset "PID[live]"
    done
    RUNS=0
fi
read -r -a MODELIST <<<"$MODES"
NM=${#MODELIST[@]}
# Each run starts fresh servers: a process's memory layout stays for its
# life and biases all its slices alike, so runs are the unit of the final
# median, slices only make each run's figure.
for run in $(seq "$RUNS"); do
p=$PORT
for m in $MODES; do start "$m" "$p"; p=$((p + 1)); done
for m in $MODES; do load "$m" 2s >/dev/null; done # warm-up
for r in $(seq "$ROUNDS"); do
    # each round starts with the next mode, so no mode always follows another
    for k in $(seq 0 $((NM - 1))); do
        m=${MODELIST[$(((r + k) % NM))]}
        t0=$(cpu_ticks "${PID[$m]}")
        b0=$(cpu_busy_ticks "$SERVER_CPU")
        read -r w0 c0 <<<"$(thread_ns "${PID[$m]}")"
        req=$(load "$m" "$SLICE")
        sleep 0.3 # the control thread writes out the last records
        t1=$(cpu_ticks "${PID[$m]}")
        b1=$(cpu_busy_ticks "$SERVER_CPU")
        read -r w1 c1 <<<"$(thread_ns "${PID[$m]}")"
        printf '%s\t%s\trequests=%s\tcpu_ticks=%s\tcpu_busy=%s\tworker_ns=%s\tcontrol_ns=%s\tloadavg=%s\n' \
            "$m" "$run.$r" "$req" "$((t1 - t0))" "$((b1 - b0))" "$((w1 - w0))" "$((c1 - c0))" \
            "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/raw.tsv"
    done
done
for m in $MODES; do kill "${PID[$m]}"; wait "${PID[$m]}" 2>/dev/null || true; unset "PID[$m]"; done
for m in alog json; do
    [ -f "$TMP/$m-access.log" ] && echo "run $run: $m: $(wc -l <"$TMP/$m-access.log") log lines" >>"$OUT/env.txt"
    rm -f "$TMP/$m-access.log"
done
done
REF=base
[ "${TOGGLE:-0}" = 1 ] && REF=nolog
python3 - "$OUT/raw.tsv" "$CLK_TCK" "$REF" <<'PY' | tee "$OUT/results.txt"
import statistics, sys
raw, clk, ref = sys.argv[1], int(sys.argv[2]), sys.argv[3]
per = {}  # (run, mode) -> slices
for line in open(raw):
    p = line.rstrip("\n").split("\t")
    kv = dict(f.split("=") for f in p[2:])
    req = int(kv["requests"])
    per.setdefault((p[1].split(".")[0], p[0]), []).append({
        "threads": (int(kv["worker_ns"]) + int(kv["control_ns"])) / req,
        "worker": int(kv["worker_ns"]) / req,
        "control": int(kv["control_ns"]) / req,
        "ticks": 1e9 * int(kv["cpu_ticks"]) / clk / req,
        "cpu": 1e9 * int(kv["cpu_busy"]) / clk / req,
        "kthreads": int(kv.get("kthreads_ns", 0)) / req,
        "req": req})
runs = sorted({r for r, _ in per})
modes = list(dict.fromkeys(m for _, m in per))
cols = ("threads", "worker", "control", "ticks", "cpu")
def med(r, m, c):
    return statistics.median(x[c] for x in per[(r, m)])
print("CPU ns per request (median over a run's slices), per run; vs %s in the same run" % ref)
print("  threads = worker + control thread, time on CPU from the scheduler (schedstat): the figure")
print("  ticks = the process's utime+stime; cpu = busy time of the server's CPU (softirq included)")
print("%-4s %-6s %6s" % ("run", "mode", "slices") + "".join("%9s %8s" % (c, "vs " + ref) for c in cols))
rel = {}
for r in runs:
    for m in modes:
        if (r, m) not in per:
            continue
        row = "%-4s %-6s %6d" % (r, m, len(per[(r, m)]))
        for c in cols:
            v = med(r, m, c)
            x = 100 * (v / med(r, ref, c) - 1) if (r, ref) in per else float("nan")
            rel.setdefault((m, c), []).append(x)
            row += "%9.0f %+7.2f%%" % (v, x)
        print(row)
print("median over %d runs of the cost against %s:" % (len(runs), ref))
kt = ref in modes and all("kthreads_ns=" in l for l in open(raw))
for m in modes:
    if m == ref:
        continue
    d = [med(r, m, "control") + 0 for r in runs if (r, m) in per]
    k = ("; kernel write-back threads %+.1f ns/request" % statistics.median(
        med(r, m, "kthreads") - med(r, ref, "kthreads") for r in runs if (r, m) in per)) if kt else ""
    print("  %-6s threads %+.2f%% (runs: %s), ticks %+.2f%%, cpu %+.2f%%; control thread %.0f ns/request%s" % (
        m, statistics.median(rel[(m, "threads")]), " ".join("%+.1f" % x for x in rel[(m, "threads")]),
        statistics.median(rel[(m, "ticks")]), statistics.median(rel[(m, "cpu")]), statistics.median(d), k))
PY
echo "stats-cost: results in $OUT"
