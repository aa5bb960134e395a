#!/usr/bin/env bash
# Runs every zbound fuzz target for SECONDS (default 60) at once, each on a scratch copy of its committed corpus
# (fuzz/corpus/<target>), and fails if any target reports a crash, a hang, a leak or a sanitizer error.
#   bash fuzz/run.sh BUILD_DIR [SECONDS]        (BUILD_DIR configured with CC=clang CXX=clang++ -DZBOUND_FUZZ=ON)
# Each target's last libFuzzer status line (execs, cov, ft, corpus) is printed; artifacts (crash-*, timeout-*,
# leak-*, oom-*) are kept in $ZBOUND_FUZZ_OUT (default: a temporary folder, printed) for reproduction:
#   BUILD_DIR/fuzz/zb_fuzz_<target> <artifact>
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
BUILD=$(cd "${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS]}" && pwd) || exit 1
SECONDS_EACH=${2:-60}
OUT=${ZBOUND_FUZZ_OUT:-$(mktemp -d /tmp/zbound_fuzz.XXXXXX)}
TARGETS=(decode filter)
pids=()
for t in "${TARGETS[@]}"; do
  bin="$BUILD/fuzz/zb_fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz/run.sh: $bin is missing (build target zb_fuzz_$t)" >&2; exit 1; }
  mkdir -p "$OUT/$t/corpus"
  cp fuzz/corpus/$t/* "$OUT/$t/corpus/"
  # -timeout: one input taking longer is a hang; -rss_limit_mb: a leak or an unbounded allocation.
  (cd "$OUT/$t" && "$bin" -max_total_time="$SECONDS_EACH" -timeout=25 -rss_limit_mb=2048 -max_len=65536 \
     -print_final_stats=1 -artifact_prefix="$OUT/$t/" corpus >"$OUT/$t/log" 2>&1) &
  pids+=($!)
done
failed=0
for i in "${!TARGETS[@]}"; do
  t=${TARGETS[$i]}
  wait "${pids[$i]}"
  rc=$?
  last=$(grep -E '^#[0-9]+' "$OUT/$t/log" | tail -1)
  execs=$(grep -E 'stat::number_of_executed_units' "$OUT/$t/log" | awk '{print $2}')
  artifacts=$(ls "$OUT/$t" | grep -E '^(crash|timeout|leak|oom|slow-unit)-' || true)
  if [ $rc -ne 0 ] || [ -n "$artifacts" ]; then
    echo "fuzz $t: FAILED (exit $rc) after ${execs:-?} execs; artifacts in $OUT/$t: $artifacts"
    grep -E 'ERROR|invariant|SUMMARY' "$OUT/$t/log" | head -5
    failed=1
  else
    echo "fuzz $t: ok, ${SECONDS_EACH} s, ${execs:-?} execs; last: $last"
  fi
done
[ $failed -eq 0 ] && [ -z "${ZBOUND_FUZZ_OUT:-}" ] && rm -rf "$OUT"
exit $failed
