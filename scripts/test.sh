#!/usr/bin/env bash
# Runs the whole test suite: every C++ test through ctest, then pytest over python_tests/, then the Python package's
# tests (python_tests/test_pkg_*.py) in a fresh venv after `pip install .`.
# Needs a build (bash scripts/setup.sh); brings it up to date first. Exits non-zero if anything failed or if a
# runner found no tests. Environment: ZBOUND_BUILD_DIR (default build), ZBOUND_BUILD_JOBS (default 2).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

BUILD_DIR=${ZBOUND_BUILD_DIR:-build}
JOBS=${ZBOUND_BUILD_JOBS:-2}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  echo "test.sh: no build in $BUILD_DIR: run 'bash scripts/setup.sh' first" >&2
  exit 1
fi
# The CUDA compiler may live outside PATH (setup.sh found it); the cache remembers where.
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
cmake --build "$BUILD_DIR" -j "$JOBS" || { echo "test.sh: build failed" >&2; exit 1; }

failed=()

echo "== ctest (C++ tests) =="
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --no-tests=error
rc=$?
[ $rc -eq 0 ] || failed+=("ctest (exit $rc)")

echo "== ctest under AddressSanitizer + UndefinedBehaviorSanitizer (decoder, format, filter, allocation failures; CPU build) =="
# The decoders read untrusted bytes: their tests (every truncation, bit flip, crafted header) also run with ASan and
# UBSan so that an out-of-bounds read or undefined behaviour fails the suite even when the result looks right.
ASAN_DIR=${ZBOUND_ASAN_BUILD_DIR:-build-asan}
ASAN_TARGETS=(core_tests filter_cdvalues_tests filter_static_tests ratio_tests rel_alloc_tests rel_regression_tests)
if cmake -S . -B "$ASAN_DIR" -DZBOUND_CUDA=OFF -DZBOUND_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
   cmake --build "$ASAN_DIR" -j "$JOBS" --target "${ASAN_TARGETS[@]}"; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$ASAN_DIR" --output-on-failure -j "$JOBS" --no-tests=error \
    -R "^(Crc32c|Bitshuffle|Sparse|Quantize|Codes|Shape|Format|RoundTrip|Api|Plot3D/RealData|Golden|Interp|Auto|CdValues|static|RatioCodebook|RatioCpu|RatioCorrupt|RatioRuns|LorenzoRatioSlabs|PwRel|PwRelLog2|HostAllocFailure|Regressions)\\."
  rc=$?
  [ $rc -eq 0 ] || failed+=("sanitizer ctest (exit $rc)")
else
  failed+=("sanitizer build")
fi

echo "== pytest (python_tests/) =="
ZBOUND_BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
export ZBOUND_BUILD_DIR
python3 -m pytest -ra python_tests/
rc=$?
case $rc in
  0) ;;
  5) failed+=("pytest collected no tests") ;;
  *) failed+=("pytest (exit $rc)") ;;
esac

echo "== Python package: pip install . in a fresh venv, then pytest python_tests/test_pkg_*.py =="
# The package as a user gets it: a new virtual environment, the test dependencies (python/requirements-test.txt,
# from pip's cache after setup.sh), `pip install .` (CMake compiles the library, plugin and CLI into it; CPU only;
# the compile cache build-py/ makes a rebuild incremental), then the package tests with that interpreter.
PKG_VENV=${ZBOUND_PKG_TEST_VENV:-build-venv-test}
pkg_start=$(date +%s)
rm -rf "$PKG_VENV"
if python3 -m venv "$PKG_VENV" &&
   "$PKG_VENV/bin/python" -m pip install --quiet --upgrade pip &&
   "$PKG_VENV/bin/python" -m pip install --quiet -r python/requirements-test.txt &&
   CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$PKG_VENV/bin/python" -m pip install --quiet . ; then
  echo "[test.sh] venv + pip install . took $(( $(date +%s) - pkg_start )) s"
  "$PKG_VENV/bin/python" -m pytest -ra python_tests/test_pkg_*.py
  rc=$?
  echo "[test.sh] package tests took $(( $(date +%s) - pkg_start )) s in all"
  case $rc in
    0) ;;
    5) failed+=("package pytest collected no tests") ;;
    *) failed+=("package pytest (exit $rc)") ;;
  esac
else
  failed+=("python package install (venv $PKG_VENV)")
fi

echo "== reliability: ThreadSanitizer, soak, fuzzing (issue 6; the MPI tests ran in ctest above) =="
rel_start=$(date +%s)
# Thread safety under ThreadSanitizer (CPU build): 8 OS threads through the C API and the filter function. One
# OpenMP thread per call: libgomp is not instrumented, so its own synchronization would show as false reports.
TSAN_DIR=${ZBOUND_TSAN_BUILD_DIR:-build-tsan}
if cmake -S . -B "$TSAN_DIR" -DZBOUND_CUDA=OFF -DZBOUND_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
   cmake --build "$TSAN_DIR" -j "$JOBS" --target rel_thread_tests h5z_zbound >/dev/null; then
  ZBOUND_THREADS=1 OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$TSAN_DIR" --output-on-failure -j "$JOBS" --no-tests=error -R '^ThreadSafety\.' \
    -E 'WithOpenMPInside'
  rc=$?
  [ $rc -eq 0 ] || failed+=("ThreadSanitizer ctest (exit $rc)")
else
  failed+=("ThreadSanitizer build")
fi
echo "[test.sh] ThreadSanitizer: $(( $(date +%s) - rel_start )) s"
# Soak: seeded random chunks for ZBOUND_SOAK_SECONDS (the seed and the counts are printed for a replay).
t=$(date +%s)
ZBOUND_SOAK_SECONDS=${ZBOUND_SOAK_SECONDS:-120} "$BUILD_DIR/tests/rel_soak_tests"
rc=$?
[ $rc -eq 0 ] || failed+=("soak (exit $rc)")
echo "[test.sh] soak: $(( $(date +%s) - t )) s"
# Fuzzing: every libFuzzer target for ZBOUND_FUZZ_SECONDS (default 60) on its committed corpus (fuzz/README.md).
t=$(date +%s)
FUZZ_DIR=${ZBOUND_FUZZ_BUILD_DIR:-build-fuzz}
if command -v clang++ >/dev/null 2>&1 &&
   CC=clang CXX=clang++ cmake -S . -B "$FUZZ_DIR" -DZBOUND_FUZZ=ON -DZBOUND_CUDA=OFF -DZBOUND_TESTS=OFF \
     -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
   cmake --build "$FUZZ_DIR" -j "$JOBS" --target zb_fuzz_decode zb_fuzz_filter >/dev/null; then
  bash fuzz/run.sh "$FUZZ_DIR" "${ZBOUND_FUZZ_SECONDS:-60}" || failed+=("fuzzing")
else
  failed+=("fuzz build (needs clang and libclang-rt-14-dev: bash scripts/setup.sh)")
fi
echo "[test.sh] fuzzing: $(( $(date +%s) - t )) s; reliability section: $(( $(date +%s) - rel_start )) s"

if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all tests passed"
