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

echo "== ctest under AddressSanitizer + UndefinedBehaviorSanitizer (decoder, format, filter; CPU build) =="
# The decoders read untrusted bytes: their tests (every truncation, bit flip, crafted header) also run with ASan and
# UBSan so that an out-of-bounds read or undefined behaviour fails the suite even when the result looks right.
ASAN_DIR=${ZBOUND_ASAN_BUILD_DIR:-build-asan}
ASAN_TARGETS=(core_tests filter_cdvalues_tests filter_static_tests ratio_tests)
if cmake -S . -B "$ASAN_DIR" -DZBOUND_CUDA=OFF -DZBOUND_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
   cmake --build "$ASAN_DIR" -j "$JOBS" --target "${ASAN_TARGETS[@]}"; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$ASAN_DIR" --output-on-failure -j "$JOBS" --no-tests=error \
    -R "^(Crc32c|Bitshuffle|Sparse|Quantize|Codes|Shape|Format|RoundTrip|Api|Plot3D/RealData|Golden|Interp|Auto|CdValues|static|RatioCodebook|RatioCpu|RatioCorrupt)\\."
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

if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all tests passed"
