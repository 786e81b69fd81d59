#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser: builds the libFuzzer targets
# (tests/fuzz/fuzz_*.c) with clang, ASan and UBSan in build-fuzz/ (cmake
# -DHE_FUZZ=ON), then runs each for SECONDS (default 60) on a copy of its
# seed corpus in a temporary directory, and prints per target the
# executions, coverage (edges "cov" and features "ft" as libFuzzer counts
# them), corpus size and crashes.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Nothing is written back to tests/fuzz/corpus/: a crash's input stays in
# the run directory (printed), to be minimized and added by hand, so the
# ctest replay keeps checking it. The run directory is kept when anything
# crashed, removed otherwise. Environment: FUZZ_JOBS (parallel targets,
# default 1), FUZZ_BUILD (build directory, default build-fuzz), FUZZ_KEEP=1
# keeps the run directory. Exit status: 1 if any target crashed.
set -euo pipefail

SECONDS_PER_TARGET=${1:-60}
shift || true
if ! [[ $SECONDS_PER_TARGET =~ ^[0-9]+$ ]] || [ "$SECONDS_PER_TARGET" -lt 1 ]; then
    echo "usage: $0 [SECONDS] [TARGET...]" >&2
    exit 2
fi
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${FUZZ_BUILD:-$SRC/build-fuzz}
JOBS=${FUZZ_JOBS:-1}

command -v clang >/dev/null || {
    echo "fuzz.sh: clang not found (scripts/setup.sh installs it)" >&2
    exit 2
}

if [ $# -gt 0 ]; then
    TARGETS=("$@")
else
    TARGETS=()
    for f in "$SRC"/tests/fuzz/fuzz_*.c; do
        TARGETS+=("$(basename "$f" .c)")
    done
fi

mkdir -p "$BUILD"
# absolute: each target runs from inside its run directory
BUILD=$(cd "$BUILD" && pwd)
echo "fuzz.sh: building ${TARGETS[*]} in $BUILD"
CC=clang cmake -S "$SRC" -B "$BUILD" -DHE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD/fuzz-cmake.log" 2>&1 || {
    cat "$BUILD/fuzz-cmake.log" >&2
    exit 2
}
cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" >"$BUILD/fuzz-build.log" 2>&1 || {
    tail -40 "$BUILD/fuzz-build.log" >&2
    exit 2
}

RUN=$(mktemp -d /tmp/he-fuzz-XXXXXX)
echo "fuzz.sh: ${SECONDS_PER_TARGET}s per target, run directory $RUN"

run_one() {
    local t=$1 dir=$RUN/$1
    mkdir -p "$dir/corpus" "$dir/crashes"
    if [ -d "$SRC/tests/fuzz/corpus/$t" ]; then
        cp -r "$SRC/tests/fuzz/corpus/$t/." "$dir/corpus/"
    fi
    # -max_total_time bounds the run; -timeout makes a hang a finding;
    # -rss_limit_mb a memory blow-up. ASan/UBSan stop at the first report.
    (cd "$dir" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        timeout $((SECONDS_PER_TARGET + 120)) "$BUILD/$t" -max_total_time="$SECONDS_PER_TARGET" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/crashes/" \
        "$dir/corpus" >"$dir/log" 2>&1) || true
}

pids=()
for t in "${TARGETS[@]}"; do
    run_one "$t" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$JOBS" ]; then
        wait "${pids[0]}"
        pids=("${pids[@]:1}")
    fi
done
for p in "${pids[@]}"; do wait "$p"; done

crashed=0
printf '%-20s %12s %8s %8s %8s %8s\n' target execs exec/s cov ft crashes
for t in "${TARGETS[@]}"; do
    log=$RUN/$t/log
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || echo "?")
    ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || echo "?")
    n=$(find "$RUN/$t/crashes" -type f | wc -l)
    [ "$n" -gt 0 ] && crashed=1
    printf '%-20s %12s %8s %8s %8s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$n"
    for c in "$RUN/$t/crashes"/*; do
        [ -f "$c" ] || continue
        echo "    $c"
        grep -m1 -E 'ERROR: |runtime error:|SUMMARY' "$log" | sed 's/^/      /' || true
    done
done

if [ "$crashed" = 1 ] || [ "${FUZZ_KEEP:-0}" = 1 ]; then
    echo "fuzz.sh: run directory kept: $RUN (logs, corpora, crashes)"
else
    rm -rf "$RUN"
fi
exit "$crashed"
