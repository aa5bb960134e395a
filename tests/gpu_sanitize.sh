#!/usr/bin/env bash
# Runs the GPU test binary under a compute-sanitizer tool one test per process, several at once, until a deadline,
# and says for each test whether it was clean (a test that skips itself runs nothing: it is listed, not clean). A
# whole-suite run under racecheck takes far longer than one device session (the PointWiseRelative parity tests alone
# ran over 300 s each), so a run can skip the tests an earlier run found clean and go on with the rest (bench/NOTES.md
# 136, 137).
#
#   tests/gpu_sanitize.sh TOOL GPU_TESTS OUT_DIR [PARALLEL] [PER_TEST_S] [TOTAL_S] [SKIP_FILE]
#
# TOOL: memcheck, racecheck, initcheck or synccheck. OUT_DIR gets <test>.log and <test>.res per test, clean.txt (the
# tests found clean, one per line: a SKIP_FILE for the next run) and summary.txt. Light tests go first, the parity
# tests on large and real arrays last. Exit status 1 if any test reported an error or failed, else 0 (tests that
# timed out or did not start are listed, not counted as failures). The tests' long loops of corruptions and
# parameter sets take every 8th item (ZBOUND_TEST_SAMPLE, tests/gpu_test_util.h; set it to 1 for all).
set -uo pipefail
export ZBOUND_TEST_SAMPLE=${ZBOUND_TEST_SAMPLE:-8}
tool=${1:?tool}; bin=${2:?gpu_tests binary}; out=${3:?output directory}
parallel=${4:-6}; per_test=${5:-300}; total=${6:-540}; skip=${7:-/dev/null}
mkdir -p "$out"
deadline=$(($(date +%s) + total))

# Test names, heavy ones last; minus those in the skip file.
"$bin" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}' | grep -v -x -F -f "$skip" > "$out/list.txt"
heavy='Large|RealData|EveryField|Rank3OnePass'
{ grep -v -E "$heavy|LorenzoRatio|Concurrent" "$out/list.txt"
  grep -E 'LorenzoRatio|Concurrent' "$out/list.txt" | grep -v -E "$heavy"
  grep -E "$heavy" "$out/list.txt"; } > "$out/order.txt"

run_one() {
    local test=$1 file="$out/${1//\//_}" left=$((deadline - $(date +%s)))
    if [ "$left" -le 15 ]; then echo "not started" > "$file.res"; return; fi
    local limit=$((left < per_test ? left : per_test)) start=$(date +%s)
    timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin" --gtest_filter="$test" > "$file.log" 2>&1
    local rc=$? took=$(($(date +%s) - start))
    local summary=$(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$file.log" | tr '\n' ' ')
    if [ "$rc" = 124 ]; then echo "timed out after ${took}s" > "$file.res"
    elif [ "$rc" = 0 ] && grep -q -E '^\[  SKIPPED \] 1 test' "$file.log"; then
        echo "skipped (ran nothing)" > "$file.res"
    elif [ "$rc" = 0 ] && grep -q -E '^\[  PASSED  \] 1 test' "$file.log"; then
        echo "clean ${took}s $summary" > "$file.res"
    else echo "FAILED rc $rc ${took}s $summary $(grep -m2 -E '^========= [A-Z]|Failure' "$file.log" | tr '\n' ' ')" > "$file.res"
    fi
}
export -f run_one
export tool bin out per_test deadline
xargs -P "$parallel" -I{} bash -c 'run_one "$1"' _ {} < "$out/order.txt"

: > "$out/clean.txt"
clean=0 failed=0 other=0
while read -r test; do
    res=$(cat "$out/${test//\//_}.res")
    case "$res" in
        clean*) clean=$((clean + 1)); echo "$test" >> "$out/clean.txt" ;;
        FAILED*) failed=$((failed + 1)); echo "$test: $res" ;;
        *) other=$((other + 1)); echo "$test: $res" ;;
    esac
done < "$out/order.txt" > "$out/summary.txt"
echo "$tool: $clean clean, $failed failed, $other timed out, skipped or not started" \
    "(of $(wc -l < "$out/order.txt"))" |
    tee -a "$out/summary.txt"
[ "$failed" = 0 ]
