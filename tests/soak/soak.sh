#!/usr/bin/env bash
# A soak with faults: hlsedge with a RAM and an SSD tier in front of the
# test origin (tests/integration/origin.py), real-time HLS viewers from
# hlsedge-loadgen --verify plus a URL-list load, while faults are injected
# on a schedule:
#   - origin connections cut mid-body (cut=N), 5xx bursts (fail=1), stalls
#     past origin.read_timeout (delay), a 1 KB/s origin (rate=1024);
#   - the SSD directory on a small tmpfs that fills up;
#   - SIGHUP every 20 s, SIGUSR1 every phase;
#   - one kill -9 and a restart that rebuilds the SSD index.
# Pass criteria (the script checks them and exits 1 if any fails):
#   - every completed body is byte-identical to the origin's: loadgen's
#     --verify finds no URL whose bodies differ, and a final sweep through
#     the edge compares every object with the origin's own bytes;
#   - no crash (the edge is alive at every sample but the kill) and no ASan
#     report (ASAN_OPTIONS log_path files);
#   - RSS and open fds flat within 5% after warm-up: the mean of the last
#     third of the samples is within TOL_PCT of the mean of the first third
#     after warm-up (samples of /proc/PID/status and /proc/PID/fd every
#     10 s; pipes apart: the send path's pool of them grows to its peak
#     use, so they are held to its bound instead); after the kill -9 the
#     new process is compared with its own warm-up. RSS here is VmRSS
#     less RssShmem: the RAM tier lives in a memfd whose pages count in
#     RSS as the tier first fills them, which takes longer than any
#     warm-up with a live stream adding segments; that part is judged
#     apart, against cache.ram_size;
#   - origin requests bounded by the objects and the faults: at most
#     OBJ_BOUND per object per freshness period, plus the fault phases'.
# It prints the figures at the end.
#
# Environment (defaults for a 30-minute run):
#   DURATION=1800     seconds of load
#   VIEWERS=500       real-time HLS viewers (loadgen --verify)
#   URL_CONNS=8       connections of the URL-list load
#   HE_BIN            the edge (default build-asan/hlsedge, else build/hlsedge)
#   HE_LOADGEN        loadgen (default build/hlsedge-loadgen)
#   WARMUP_PCT=30     the part of each process's run that is warm-up
#   TOL_PCT=5         RSS/fd tolerance
#   SAMPLE_S=10       sampling period
#   RAM_SIZE=64m      the RAM tier (it holds the whole VOD library)
#   KEEP=1            keep the work directory
# Needs root for the tmpfs (without it the SSD directory is a plain one and
# the disk-full fault is reported as not injected).
set -uo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
DURATION=${DURATION:-1800}
VIEWERS=${VIEWERS:-500}
URL_CONNS=${URL_CONNS:-8}
WARMUP_PCT=${WARMUP_PCT:-30}
TOL_PCT=${TOL_PCT:-5}
SAMPLE_S=${SAMPLE_S:-10}
RAM_SIZE=${RAM_SIZE:-64m}
if [ -z "${HE_BIN:-}" ]; then
    HE_BIN=$SRC/build-asan/hlsedge
    [ -x "$HE_BIN" ] || HE_BIN=$SRC/build/hlsedge
fi
HE_LOADGEN=${HE_LOADGEN:-$SRC/build/hlsedge-loadgen}
for b in "$HE_BIN" "$HE_LOADGEN"; do
    [ -x "$b" ] || { echo "soak: $b not built (bash scripts/build.sh [--asan])" >&2; exit 2; }
done

W=$(mktemp -d /tmp/he-soak.XXXXXX)
PIDS=()
MOUNTED=0
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    [ -n "${EDGE:-}" ] && kill "$EDGE" 2>/dev/null
    wait 2>/dev/null
    [ "$MOUNTED" = 1 ] && umount "$W/ssd" 2>/dev/null
    [ "${KEEP:-0}" = 1 ] || rm -rf "$W"
}
trap cleanup EXIT

# below the ephemeral range, as the tests pick theirs (he.py free_port)
free_port() { python3 -c "import sys; sys.path.insert(0, '$SRC/tests/integration'); from he import free_port; print(free_port())"; }
OPORT=$(free_port)
EPORT=$(free_port)
APORT=$(free_port)
ctl() { curl -s -o /dev/null "http://127.0.0.1:$OPORT/_control?$1"; }
log() { printf '[soak %4ds] %s\n' $(( $(date +%s) - T0 )) "$*"; }
T0=$(date +%s)

# ---- the origin: a VOD library and a live stream
SRC=$SRC python3 -c "
import sys; sys.path.insert(0, '$SRC/tests/integration')
import he; he.make_library('$W/lib', big_mb=2)
" || { echo "soak: cannot make the library" >&2; exit 2; }
python3 "$SRC/tests/integration/origin.py" --port "$OPORT" --root "$W/lib" --live /live/a \
    > "$W/origin.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$OPORT/_stats" && break; sleep 0.1; done
# a short freshness so that misses and revalidations keep reaching the
# origin while the faults are on
TTL=20
ctl "cache_control=max-age%3D$TTL"

# ---- the SSD directory: a small tmpfs that fills up (the store is told
# it has 4x more room than the file system holds)
mkdir -p "$W/ssd" "$W/root"
if mount -t tmpfs -o size=8m tmpfs "$W/ssd" 2>/dev/null; then MOUNTED=1; fi

cat > "$W/hlsedge.yaml" <<EOF
listen: ["127.0.0.1:$EPORT"]
workers: 2
root: $W/root
admin:
  listen: "127.0.0.1:$APORT"
log:
  level: warn
cache:
  ram_size: $RAM_SIZE
  ram_object_max: 8m
  ssd: ["$W/ssd:32m"]
  admission: false
  stale_while_revalidate: 5s
  stale_if_error: 30s
origin:
  urls: ["http://127.0.0.1:$OPORT"]
  sources: origin-first
  connect_timeout: 1s
  read_timeout: 2s
  total_timeout: 20s
  retries: 1
EOF

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:log_path=$W/asan:quarantine_size_mb=32"
start_edge() {
    "$HE_BIN" -c "$W/hlsedge.yaml" >> "$W/edge.log" 2>&1 &
    EDGE=$!
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$APORT/healthz" && return 0
        kill -0 "$EDGE" 2>/dev/null || break
        sleep 0.1
    done
    echo "soak: the edge did not start:" >&2
    cat "$W/edge.log" >&2
    exit 1
}
start_edge
EDGE_START=$(date +%s)
log "edge pid $EDGE on :$EPORT, origin :$OPORT, ssd tmpfs=$MOUNTED, $DURATION s, $VIEWERS viewers"

# ---- the load
(cd "$W/lib" && find . -type f \( -name '*.ts' -o -name '*.m3u8' -o -name '*.mp4' -o -name '*.m4s' \
    -o -name '*.aac' -o -name '*.vtt' -o -name '*.bin' \) ! -name '* *' | sed "s|^\.|http://127.0.0.1:$EPORT|" \
    | sort) > "$W/urls.txt"
NOBJ=$(wc -l < "$W/urls.txt")
# the schedule counts from T0, before the edge started: loadgen, started
# after it, outlasts the schedule by that much and one second
LG_DUR=$((DURATION + 1))
"$HE_LOADGEN" --mode hls --viewers "$VIEWERS" --pace realtime --rendition mix:4,3,2,1,0 --verify \
    --timeout 15s --json -q -d "${LG_DUR}s" "http://127.0.0.1:$EPORT/master.m3u8" \
    > "$W/lg_hls.json" 2> "$W/lg_hls.err" &
LG1=$!
# live viewers: not --verify, whose check is that a URL's body never
# changes, which a live playlist does every segment
"$HE_LOADGEN" --mode hls --viewers $(( VIEWERS / 10 + 1 )) --pace realtime --timeout 15s --json -q \
    -d "${LG_DUR}s" "http://127.0.0.1:$EPORT/live/a/index.m3u8" > "$W/lg_live.json" 2> "$W/lg_live.err" &
PIDS+=($!)
"$HE_LOADGEN" --mode urls -c "$URL_CONNS" --verify --popularity zipf:1.0 --timeout 15s --json -q \
    -d "${LG_DUR}s" --url-file "$W/urls.txt" > "$W/lg_urls.json" 2> "$W/lg_urls.err" &
LG2=$!
PIDS+=("$LG1" "$LG2")

# ---- the schedule: phases of PHASE seconds, each fault followed by a calm
# one, the kill -9 at 60% of the run
PHASE=$(( DURATION / 24 ))
[ "$PHASE" -lt 3 ] && PHASE=3
FAULTS=(cut fail stall slow diskfill)
FAULT_PHASES=0
KILL_AT=$(( DURATION * 60 / 100 ))
KILLED=0
SAMPLES="$W/samples.txt"   # t pid rss_kb fds_but_pipes age_s anon_kb shmem_kb pipes
: > "$SAMPLES"
ALIVE_FAIL=0
last_hup=0 last_sample=-$SAMPLE_S phase_no=-1
fill_pid=

apply_fault() {
    ctl "clear=1"
    ctl "cache_control=max-age%3D$TTL"
    case "$1" in
    cut) ctl "cut=3000" ;;                        # head, 3000 body bytes, close
    fail) ctl "fail=1" ;;                         # a 5xx burst
    stall) ctl "delay=3" ;;                       # past read_timeout (2 s)
    slow) ctl "path=/360p/seg_00001.ts&rate=1024"; ctl "path=/misc/big.ts&rate=1024" ;;
    diskfill)
        if [ "$MOUNTED" = 1 ]; then
            # the tmpfs fills up under the store: its writes get ENOSPC
            dd if=/dev/zero of="$W/ssd/filler" bs=1M count=16 2>/dev/null
        fi ;;
    calm) rm -f "$W/ssd/filler" ;;
    esac
}

while :; do
    now=$(date +%s)
    t=$(( now - T0 ))
    [ "$t" -ge "$DURATION" ] && break
    # phases
    # one phase after the other, none skipped when the box lags
    if [ "$t" -ge $(( (phase_no + 1) * PHASE )) ]; then
        phase_no=$((phase_no + 1))
        p=$phase_no
        if [ $(( p % 2 )) = 1 ]; then
            f=${FAULTS[$(( (p / 2) % ${#FAULTS[@]} ))]}
            FAULT_PHASES=$((FAULT_PHASES + 1))
        else
            f=calm
        fi
        apply_fault "$f"
        kill -USR1 "$EDGE" 2>/dev/null
        log "phase $p: $f"
    fi
    if [ $(( t - last_hup )) -ge 20 ]; then
        kill -HUP "$EDGE" 2>/dev/null
        last_hup=$t
    fi
    if [ "$KILLED" = 0 ] && [ "$t" -ge "$KILL_AT" ]; then
        curl -s "http://127.0.0.1:$APORT/stats" > "$W/stats_before_kill.json"
        ls "$W"/ssd/??/*.obj 2>/dev/null | wc -l > "$W/ssd_files_at_kill"
        log "kill -9 $EDGE; restart (the SSD index is rebuilt)"
        kill -9 "$EDGE"
        wait "$EDGE" 2>/dev/null
        rm -f "$W/ssd/filler"
        start_edge
        EDGE_START=$(date +%s)
        KILLED=1
        grep -h "cache\|ssd\|store" "$W/edge.log" | tail -3
        continue
    fi
    if [ $(( t - last_sample )) -ge "$SAMPLE_S" ]; then
        last_sample=$t
        if kill -0 "$EDGE" 2>/dev/null; then
            read -r rss anon shmem < <(awk '/^VmRSS:/ {r=$2} /^RssAnon:/ {a=$2}
                /^RssShmem:/ {s=$2} END {print r+0, a+0, s+0}' "/proc/$EDGE/status")
            # pipes apart: the send path's pool of them grows to the peak of
            # concurrent vmsplice sends, which is no leak
            pipes=$(find "/proc/$EDGE/fd" -lname 'pipe:*' 2>/dev/null | wc -l)
            fds=$(( $(ls "/proc/$EDGE/fd" | wc -l) - pipes ))
            echo "$t $EDGE $rss $fds $(( now - EDGE_START )) $anon $shmem $pipes" >> "$SAMPLES"
        else
            ALIVE_FAIL=1
            log "the edge died"
            break
        fi
    fi
    sleep 1
done
ctl "clear=1"
ctl "cache_control=max-age%3D$TTL"
rm -f "$W/ssd/filler"
log "load ends; waiting for loadgen"
wait "$LG1" "$LG2" 2>/dev/null

# ---- the final sweep: every object through the edge against the origin
SWEEP_BAD=0
SWEEP_N=0
for u in $(cat "$W/urls.txt") "http://127.0.0.1:$EPORT/live/a/index.m3u8"; do
    path=${u#http://127.0.0.1:$EPORT}
    a=$(curl -s --max-time 30 "$u" | sha256sum | cut -c1-64)
    b=$(curl -s --max-time 30 "http://127.0.0.1:$OPORT$path" | sha256sum | cut -c1-64)
    SWEEP_N=$((SWEEP_N + 1))
    if [ "$a" != "$b" ]; then
        # a live playlist may move between the two reads: once more
        [ "${path#/live/}" != "$path" ] && continue
        SWEEP_BAD=$((SWEEP_BAD + 1))
        log "differs from the origin: $path"
    fi
done

kill -0 "$EDGE" 2>/dev/null || ALIVE_FAIL=1
curl -s "http://127.0.0.1:$APORT/stats" > "$W/stats_end.json"
kill -TERM "$EDGE"
wait "$EDGE"
EDGE_RC=$?
EDGE=
ORIGIN=$(curl -s "http://127.0.0.1:$OPORT/_stats")

# ---- the verdict
python3 - "$W" "$DURATION" "$WARMUP_PCT" "$TOL_PCT" "$NOBJ" "$TTL" "$FAULT_PHASES" "$PHASE" \
    "$SWEEP_N" "$SWEEP_BAD" "$ALIVE_FAIL" "$EDGE_RC" "$KILLED" "$MOUNTED" "$VIEWERS" "$RAM_SIZE" <<EOF
import glob, json, os, sys
w, dur, warm, tol, nobj, ttl, nfault, phase, sweep_n, sweep_bad, alive_fail, edge_rc, killed, mounted, viewers, ram = sys.argv[1:]
ram_kib = int(ram[:-1]) * {"k": 1, "m": 1024, "g": 1 << 20}[ram[-1].lower()] if ram[-1].isalpha() else int(ram) // 1024
dur, warm, tol, nobj, ttl, nfault, phase = int(dur), int(warm), float(tol), int(nobj), int(ttl), int(nfault), int(phase)
PIPE_FD_BOUND = 2 * 2 * (16 + 256)  # workers: 2 above; two fds a pipe
fails = []
def lg(name):
    try:
        with open(os.path.join(w, name)) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fails.append("%s unreadable: %s" % (name, e))
        return {}
hls, urls, live = lg("lg_hls.json"), lg("lg_urls.json"), lg("lg_live.json")
print("soak: %d s, %s viewers, %d objects, %d fault phases of %d s, kill -9: %s, SSD on tmpfs: %s"
      % (dur, viewers, nobj, nfault, phase, "yes" if killed == "1" else "no", "yes" if mounted == "1" else "no"))
for name, r in (("hls", hls), ("urls", urls)):
    v = r.get("verify", {})
    print("  loadgen %-4s requests %s, errors %s, bodies verified %s, URLs with differing bodies %s"
          % (name, r.get("requests"), r.get("errors"), v.get("checked"), v.get("mismatched_urls")))
    if v.get("mismatched_urls", 1) != 0:
        fails.append("loadgen %s: bodies of one URL differ (%s URLs)" % (name, v.get("mismatched_urls")))
    if not v.get("checked"):
        fails.append("loadgen %s verified no body" % name)
print("  loadgen live requests %s, errors %s (not verified: a live playlist changes)"
      % (live.get("requests"), live.get("errors")))
print("  final sweep: %s objects, %s differ from the origin" % (sweep_n, sweep_bad))
if int(sweep_bad):
    fails.append("%s objects differ from the origin's bytes" % sweep_bad)
asan = glob.glob(os.path.join(w, "asan*"))
print("  ASan reports: %d; edge alive throughout: %s; exit status at SIGTERM: %s"
      % (len(asan), "no" if alive_fail == "1" else "yes", edge_rc))
for a in asan:
    fails.append("ASan report %s" % a)
    sys.stdout.write(open(a, errors="replace").read()[:4000])
if alive_fail == "1":
    fails.append("the edge died")
if edge_rc != "0":
    fails.append("the edge exited %s at SIGTERM" % edge_rc)
# RSS and fds per process, after its warm-up
rows = [l.split() for l in open(os.path.join(w, "samples.txt")) if l.strip()]
for pid in sorted({r[1] for r in rows}, key=lambda p: [r[1] for r in rows].index(p)):
    # (t, the process's own memory: VmRSS less the RAM tier's memfd pages,
    #  fds but pipes, age, RssAnon, RssShmem, VmRSS, pipes)
    mine = [(int(r[0]), int(r[2]) - int(r[6]), int(r[3]), int(r[4]), int(r[5]), int(r[6]), int(r[2]), int(r[7]))
            for r in rows if r[1] == pid]
    life = mine[-1][3] if mine else 0
    post = [m for m in mine if m[3] >= life * warm / 100]
    if len(post) < 3:
        print("  pid %s: %d samples after warm-up, too few to judge" % (pid, len(post)))
        continue
    k = max(1, len(post) // 3)
    def thirds(i):
        first = sum(m[i] for m in post[:k]) / k
        last = sum(m[i] for m in post[-k:]) / k
        return first, last, (last - first) * 100.0 / first if first else 0
    for i, what in ((1, "RSS-shm KiB"), (2, "open fds but pipes")):
        first, last, grow = thirds(i)
        print("  pid %s %-8s after warm-up: first third %.0f, last third %.0f (%+.1f%%), min %d, max %d, %d samples"
              % (pid, what, first, last, grow, min(m[i] for m in post), max(m[i] for m in post), len(post)))
        if grow > tol:
            fails.append("pid %s: %s grew %.1f%% after warm-up (limit %.0f%%)" % (pid, what, grow, tol))
    # pipes: each worker keeps at most 16 idle and 256 busy ones
    # (server/net/send.c), two descriptors each
    pipe_max = max(m[7] for m in post)
    print("  pid %s pipe fds after warm-up: min %d, max %d (bound %d)"
          % (pid, min(m[7] for m in post), pipe_max, PIPE_FD_BOUND))
    if pipe_max > PIPE_FD_BOUND:
        fails.append("pid %s: %d pipe fds, over the send path's bound %d" % (pid, pipe_max, PIPE_FD_BOUND))
    # what RSS is made of: the heap, and the RAM tier's memfd, which
    # cache.ram_size bounds (with 1 MiB of slack)
    shm_max = max(m[5] for m in post)
    if shm_max > ram_kib + 1024:
        fails.append("pid %s: RssShmem %d KiB over cache.ram_size (%d KiB)" % (pid, shm_max, ram_kib))
    for i, what in ((6, "VmRSS"), (4, "RssAnon"), (5, "RssShmem")):
        first, last, grow = thirds(i)
        print("  pid %s %-8s after warm-up: first third %.0f KiB, last third %.0f KiB (%+.1f%%), max %d"
              % (pid, what, first, last, grow, max(m[i] for m in post)))
# origin requests: with a healthy origin at most 3 per object per
# freshness period (fill, revalidation, a refill after the restart), and
# the live stream's playlist and segments; each failed origin request (as
# the edge counts them, cause by cause) may cost it one more, its retry
try:
    o = json.loads("""$ORIGIN""")
except ValueError:
    o = {}
total = o.get("total", -1)
periods = dur // ttl + 2
live = sum(n for p, n in o.get("requests", {}).items() if p.startswith("/live/"))
failed = 0
for name in ("stats_before_kill.json", "stats_end.json"):
    try:
        c = json.load(open(os.path.join(w, name))).get("cache", {})
    except (OSError, ValueError):
        continue
    failed += sum(c.get("origin_errors", {}).values())
    print("  edge %s: %s" % (name[6:-5].replace("_", " "), json.dumps({k: c.get(k) for k in
          ("origin_requests", "store_writes", "disk_errors", "origin_errors") if k in c})))
# the restarted process serves from the SSD index it rebuilt
try:
    at_kill = int(open(os.path.join(w, "ssd_files_at_kill")).read())
    ssd_hits = json.load(open(os.path.join(w, "stats_end.json")))["cache"]["tiers"]["ssd"]["hits"]
    print("  SSD: %d object files at the kill -9; the restarted edge's SSD hits: %d" % (at_kill, ssd_hits))
    if at_kill and not ssd_hits:
        fails.append("the restarted edge served nothing from the %d SSD objects it found" % at_kill)
except (OSError, ValueError, KeyError) as e:
    if killed == "1":
        fails.append("no SSD figures around the kill -9: %s" % e)
bound = nobj * periods * 3 + dur * 4 + 2 * failed
print("  origin requests: %d (live stream %d), bound %d = 3 x %d objects x %d freshness periods"
      " + 4/s for the live stream + 2 x %d failed origin requests" % (total, live, bound, nobj, periods, failed))
if total < 0 or total > bound:
    fails.append("origin requests %d over the bound %d" % (total, bound))
if fails:
    print("SOAK FAILED:")
    for f in fails:
        print("  - " + f)
    sys.exit(1)
print("SOAK PASSED")
EOF
RC=$?
[ "$RC" != 0 ] && [ "${KEEP:-0}" != 1 ] && { KEEP=1; echo "soak: work directory kept: $W"; }
exit $RC
