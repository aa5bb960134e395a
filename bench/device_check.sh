#!/usr/bin/env bash
# One call on the GPU machine: GPU tests (CPU/GPU byte parity included), the filter and h5py tests forced onto the
# GPU, compute-sanitizer on the GPU tests, and the 1 GB fast-pipeline benchmark. Logs go to $OUT.
#
# Prepared here (the GPU machine has no internet and only the repository):
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
#         -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc && cmake --build build-gpu -j2
#   (sm_90 code only, for the H100/H200: each binary links the CUDA library, and with the default 80-real + 90 the
#   whole pack is about 70 MB of archives, over the 64 MiB carry limit; with 90-real it is about 33 MB)
#   bash bench/device_check.sh pack      # the binaries and ../shared/data into .devrun/, archived into .devpack/
#                                        # (`pack light`: gpu_tests and zbound only, for the sizes and sanitize modes)
# then run `bash bench/device_check.sh run` there with .devpack carried (git-ignored through .git/info/exclude).
# A whole run takes longer than one call; three shorter modes fit one call each:
#   bash bench/device_check.sh sizes          the GPU tests, then per-call times at 4-64 MiB (the walk plan against
#                                             two passes, two rounds) and the batched rows
#   bash bench/device_check.sh io             the device chunk I/O tests and benchmarks (C API and CuPy, 4 GB) and the
#                                             filter's tests forced onto the GPU (needs the whole pack)
#   bash bench/device_check.sh sanitize S [T] memcheck and racecheck side by side for S seconds, a test per process
#                                             (tests/gpu_sanitize.sh), skipping the tests that
#                                             bench/results/sanitize/<tool>_clean_<T>.txt list; the new lists
#                                             (<tool>_clean.txt, <tool>_rest.txt) go to $OUT/sanitize
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUN=.devrun

if [ "${1:-}" = pack ]; then
    BUILD=${BUILD:-build-gpu}
    rm -rf "$RUN" && mkdir -p "$RUN/bin" "$RUN/plugin" "$RUN/data"
    mkdir -p "$RUN/lib"
    cp "$BUILD/tests/gpu_tests" "$BUILD/bin/zbound" "$RUN/bin/"
    # `pack light`: only what the sizes and sanitize modes run (from `build`, whose default architectures make the
    # whole pack too big to carry).
    if [ "${2:-}" != light ]; then
        cp "$BUILD"/tests/{core_tests,ratio_tests,filter_plugin_tests,filter_static_tests,h5chunks_tests} "$RUN/bin/"
        cp "$BUILD/examples/device_chunks" "$RUN/bin/"
        cp "$BUILD"/tests/rel_{gpu_fault,thread,golden_h5}_tests "$RUN/bin/" 2>/dev/null || echo "rel tests not built"
        [ -x "$BUILD/examples/mpi_write_read" ] && cp "$BUILD/examples/mpi_write_read" "$RUN/bin/"
        cp "$BUILD"/plugin/*.so "$RUN/plugin/"
        cp "$BUILD/cuda/libzbound.so" "$RUN/lib/"   # the Python package's library
    fi
    # The carry limit is 64 MiB: binaries are stripped and the TREFHT members beyond the first (read only by the
    # h5py real-data tests, which cannot run here anyway) stay here.
    find ../shared/data -maxdepth 1 -type f ! -name 'cesm_trefht_b06_59.nc' ! -name 'cesm_trefht_b06_6?.nc' \
        -exec cp {} "$RUN/data/" \;
    strip "$RUN"/bin/* "$RUN"/lib/*.so 2>/dev/null
    # The carry limit (64 MiB with the tree) is too small for the folder itself: carry .devpack/ (xz archives, about
    # a third of the size) and let `run` unpack it.
    rm -rf .devpack && mkdir -p .devpack
    tar cJf .devpack/bin.txz -C "$RUN" bin lib plugin && tar cJf .devpack/data.txz -C "$RUN" data
    mkdir -p .git/info
    for d in "/$RUN/" "/.devpack/"; do grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude; done
    du -sh "$RUN" .devpack
    exit 0
fi
if [ ! -d "$RUN/bin" ] && [ -f .devpack/bin.txz ]; then   # carried as archives (see pack)
    mkdir -p "$RUN" && tar xJf .devpack/bin.txz -C "$RUN" && tar xJf .devpack/data.txz -C "$RUN"
fi

OUT=${OUT:-/tmp/zbound-device}
mkdir -p "$OUT"
root=$(pwd)
# The tests have the paths of this repository's machine compiled in (/work/main, /work/shared/data).
[ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
[ -e /work/shared/data ] || { mkdir -p /work/shared && ln -s "$root/$RUN/data" /work/shared/data; }
FIELDS=${FIELDS:-/tmp/zbound-fields}   # outside $OUT: about 100 MB that need not come back
TREFHT="$FIELDS/cesm_trefht_b06_57__TREFHT.raw"   # one CESM member, 110 x 64 x 128 f32: most timings use it
export ZBOUND_GPU_FIELDS="$FIELDS" ZBOUND_BUILD_DIR="$root/$RUN"
summary() { echo "$1: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? passed|failed|ERROR SUMMARY|RACECHECK SUMMARY' "$2" | tr '\n' ' ')"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 tests/gpu_make_fields.py "$RUN/data" "$FIELDS" > "$OUT/fields.log" 2>&1 || echo "field extraction failed"

# The chunk I/O and the filter through the GPU (issue 4 criteria 4 and 5): the `io` mode, and part of `run`.
io_checks() {
    # Device chunk I/O through the C API (h5chunks/), with the default window and with a 1 MB one (many batches).
    "$RUN/bin/h5chunks_tests" > "$OUT/h5chunks_tests.log" 2>&1
    summary h5chunks_tests "$OUT/h5chunks_tests.log"
    ZBOUND_CHUNK_WINDOW_MB=1 "$RUN/bin/h5chunks_tests" --gtest_filter='DeviceChunks.*' > "$OUT/h5chunks_window.log" 2>&1
    summary "h5chunks_tests (1 MB window)" "$OUT/h5chunks_window.log"
    # The filter through the GPU: every chunk, however small, goes to the GPU (an error there fails the test).
    export ZBOUND_BACKEND=gpu ZBOUND_GPU_MIN_BYTES=0
    HDF5_PLUGIN_PATH="$root/$RUN/plugin" "$RUN/bin/filter_plugin_tests" > "$OUT/filter_plugin.log" 2>&1
    summary "filter_plugin_tests (gpu)" "$OUT/filter_plugin.log"
    "$RUN/bin/filter_static_tests" > "$OUT/filter_static.log" 2>&1
    summary "filter_static_tests (gpu)" "$OUT/filter_static.log"
    python3 -m pytest -q -p no:cacheprovider python_tests/test_h5_h5py.py python_tests/test_h5_realdata.py \
        > "$OUT/pytest_gpu.log" 2>&1
    echo "pytest h5py (gpu): $(tail -1 "$OUT/pytest_gpu.log")"
    unset ZBOUND_BACKEND ZBOUND_GPU_MIN_BYTES
    # Chunk I/O from GPU arrays (issue 4): the package tests in the tree, the example, and a 4 GB CuPy array.
    export ZBOUND_LIBRARY="$root/$RUN/lib/libzbound.so" PYTHONPATH="$root/python"
    python3 -m pytest -q -p no:cacheprovider python_tests/test_pkg_direct.py > "$OUT/pytest_direct.log" 2>&1
    echo "pytest direct chunk I/O: $(grep -E "passed|failed" "$OUT/pytest_direct.log" | tail -1)"
    HDF5_PLUGIN_PATH="$root/$RUN/plugin" python3 examples/device_chunks.py /dev/shm/zb_example.h5 2>&1 | tail -2
    HDF5_PLUGIN_PATH="$root/$RUN/plugin" python3 bench/device_chunks_bench.py "$TREFHT" \
        --dims 110x64x128 --size-gb 4 --chunk-mb 64 > "$OUT/device_chunks.txt" 2>&1 || echo "device chunks bench failed"
    HDF5_PLUGIN_PATH="$root/$RUN/plugin" python3 bench/device_chunks_bench.py "$TREFHT" \
        --dims 110x64x128 --size-gb 4 --chunk-mb 16 >> "$OUT/device_chunks.txt" 2>&1 || echo "device chunks bench (16 MB) failed"
    # The same through the C API (examples/device_chunks.c): 4 GB, 64 MB and 16 MB chunks.
    for mb in 64 16; do
        HDF5_PLUGIN_PATH="$root/$RUN/plugin" "$RUN/bin/device_chunks" /dev/shm/zb_device_chunks_c.h5 \
            "$TREFHT" 110 64 128 4 $mb 1e-3 >> "$OUT/device_chunks.txt" 2>&1 ||
            echo "device_chunks (C, $mb MB) failed: $(tail -2 "$OUT/device_chunks.txt")"
        rm -f /dev/shm/zb_device_chunks_c.h5
    done
    unset ZBOUND_LIBRARY PYTHONPATH
}

case "${1:-run}" in
io)
    io_checks
    cat "$OUT/device_chunks.txt"
    exit 0 ;;
sizes)
    "$RUN/bin/gpu_tests" > "$OUT/gpu_tests.log" 2>&1
    summary gpu_tests "$OUT/gpu_tests.log"
    # The plan against two passes everywhere (ZBOUND_GPU_WALK=0); a setting is a variable's assignment, or plan.
    for round in 1 2; do
        for setting in plan ZBOUND_GPU_WALK=0; do
            env $([ "$setting" != plan ] && echo "$setting") "$RUN/bin/zbound" bench \
                "$TREFHT" -t f32 -d 110x64x128 --rel 1e-3 --predictor lorenzo \
                --encoder fast --backend gpu --sizes 4.194304,8.388608,16.777216,33.554432,67.108864 --repeat 25 \
                --warmup 5 --label "$setting" --json >> "$OUT/sizes.jsonl" 2>> "$OUT/sizes.err"
        done
    done
    python3 - "$OUT/sizes.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    us = lambda gbps: r['bytes_in'] / gbps / 1e3
    c, d = r['compress_gbps'], r['decompress_gbps']
    print(f"{r['field']:10s} {r['residency']:8s} {r['bytes_in'] / 2**20:4.0f} MiB  compress {us(c):7.1f} us "
          f"{c:6.1f} GB/s  decompress {us(d):7.1f} us {d:6.1f} GB/s  {r['check']}")
EOF
    exit 0 ;;
sanitize)
    seconds=${2:-500} tag=${3:-}
    for tool in memcheck racecheck; do
        skip=/dev/null
        [ -n "$tag" ] && skip=bench/results/sanitize/${tool}_clean_$tag.txt
        parallel=$([ "$tool" = memcheck ] && echo 6 || echo 8)
        bash tests/gpu_sanitize.sh "$tool" "$RUN/bin/gpu_tests" "/tmp/zbound-san/$tool" "$parallel" 480 "$seconds" \
            "$skip" > "/tmp/zbound-san-$tool.txt" 2>&1 &
    done
    wait
    # The lists and one file of failures: a call brings back at most 8 files (with gpu.txt and fields.log), so not a
    # log per test.
    mkdir -p "$OUT/sanitize"
    status=0
    for tool in memcheck racecheck; do
        cp "/tmp/zbound-san/$tool/clean.txt" "$OUT/sanitize/${tool}_clean.txt"
        cp "/tmp/zbound-san/$tool/summary.txt" "$OUT/sanitize/${tool}_rest.txt"
        tail -1 "/tmp/zbound-san/$tool/summary.txt"
        # The start of each failing test's log.
        for res in $(grep -l -E '^FAILED' /tmp/zbound-san/$tool/*.res 2>/dev/null); do
            status=1
            { echo "== $(basename "${res%.res}") ($tool)"; head -c 20000 "${res%.res}.log"; } >> "$OUT/sanitize/failures.log"
        done
    done
    exit $status ;;
esac

"$RUN/bin/gpu_tests" > "$OUT/gpu_tests.log" 2>&1
summary gpu_tests "$OUT/gpu_tests.log"
# The fast encoder's one-pass form on every array (by default only arrays that fill the GPU take it), in walks of 1
# and 3 tiles per block.
for walk in 1 3; do
    ZBOUND_GPU_WALK=$walk "$RUN/bin/gpu_tests" --gtest_filter='GpuParity.*:-*LorenzoRatio*:*PointWise*' \
        > "$OUT/gpu_walk$walk.log" 2>&1
    summary "gpu_tests parity (walk $walk)" "$OUT/gpu_walk$walk.log"
done
"$RUN/bin/core_tests" > "$OUT/core_tests.log" 2>&1
summary core_tests "$OUT/core_tests.log"
"$RUN/bin/ratio_tests" > "$OUT/ratio_tests.log" 2>&1
summary ratio_tests "$OUT/ratio_tests.log"
io_checks

# 1 GB fast-pipeline benchmark, f32, rel 1e-3, real fields tiled along their slowest dim.
: > "$OUT/bench.jsonl"
for spec in "gmt_sst__z 1080x2160" "gmt_geoid_1m__z 451x601" "cesm_trefht_b06_57__TREFHT 110x64x128"; do
    set -- $spec
    "$RUN/bin/zbound" bench "$FIELDS/$1.raw" -t f32 -d "$2" --rel 1e-3 --predictor lorenzo --encoder fast --backend gpu --size-mb 1024 \
        --repeat 5 --warmup 2 --label "$1" --json >> "$OUT/bench.jsonl" 2> "$OUT/bench_$1.err" ||
        echo "bench $1 failed: $(tail -2 "$OUT/bench_$1.err")"
done
# The interp predictor on the GPU (format v2, fast encoder), one field.
"$RUN/bin/zbound" bench "$TREFHT" -t f32 -d 110x64x128 --rel 1e-3 \
    --predictor interp --encoder fast --backend gpu --size-mb 1024 --repeat 5 --warmup 2 \
    --label TREFHT_interp --json >> "$OUT/bench.jsonl" 2> "$OUT/bench_interp.err" || echo "bench interp failed"
# The ratio pipeline on the GPU (interp predictor + ratio encoder, format v3, or v4 with run tokens).
for spec in "gmt_sst__z 1080x2160" "gmt_geoid_1m__z 451x601" "cesm_trefht_b06_57__TREFHT 110x64x128"; do
    set -- $spec
    "$RUN/bin/zbound" bench "$FIELDS/$1.raw" -t f32 -d "$2" --rel 1e-3 --predictor interp --encoder ratio \
        --backend gpu --size-mb 1024 --repeat 5 --warmup 2 --label "$1" --json >> "$OUT/bench.jsonl" \
        2> "$OUT/bench_ratio_$1.err" || echo "bench ratio $1 failed: $(tail -2 "$OUT/bench_ratio_$1.err")"
done
# The Lorenzo predictor with the ratio encoder on the GPU (format v2, or v4 with run tokens), one field.
"$RUN/bin/zbound" bench "$TREFHT" -t f32 -d 110x64x128 --rel 1e-3 \
    --predictor lorenzo --encoder ratio --backend gpu --size-mb 1024 --repeat 5 --warmup 2 \
    --label TREFHT_lorenzo_ratio --json >> "$OUT/bench.jsonl" 2> "$OUT/bench_lorenzo_ratio.err" ||
    echo "bench lorenzo ratio failed: $(tail -2 "$OUT/bench_lorenzo_ratio.err")"
# The point-wise relative bound (format v5): the log transform, the inner interp + ratio stream, the check and the
# exceptions all on the GPU.
"$RUN/bin/zbound" bench "$TREFHT" -t f32 -d 110x64x128 --pw-rel 1e-3 \
    --predictor interp --encoder ratio --backend gpu --size-mb 256 --repeat 3 --warmup 1 --label TREFHT_pw_rel \
    --json >> "$OUT/bench.jsonl" 2> "$OUT/bench_pwrel.err" || echo "bench pw_rel failed: $(tail -2 "$OUT/bench_pwrel.err")"
# Size sweep (issue 4): the fast pipeline host-resident and device-resident at 1 .. 1024 MB.
"$RUN/bin/zbound" bench "$TREFHT" -t f32 -d 110x64x128 --rel 1e-3 \
    --predictor lorenzo --encoder fast --backend gpu --sizes 1,4,16,64,256,1024 --repeat 5 --warmup 2 \
    --label TREFHT > "$OUT/bench_sizes.txt" 2>&1 || echo "bench --sizes failed: $(tail -2 "$OUT/bench_sizes.txt")"
# The same sizes on the device machine's CPU cores: where the GPU starts to pay (ZBOUND_GPU_MIN_BYTES).
"$RUN/bin/zbound" bench "$TREFHT" -t f32 -d 110x64x128 --rel 1e-3 \
    --predictor lorenzo --encoder fast --backend cpu --sizes 0.25,1,4,16,64 --repeat 5 --warmup 1 \
    --label TREFHT_cpu >> "$OUT/bench_sizes.txt" 2>&1 || echo "bench --sizes (cpu) failed"
# h5py through the filter (issue 4): 2 GB in 16 MB chunks in /dev/shm, zbound (GPU) against uncompressed.
ZBOUND_BACKEND=gpu python3 bench/h5py_throughput.py "$TREFHT" --dims 110x64x128 \
    --plugin-dir "$RUN/plugin" --rel 1e-3 --size-gb 2 --chunk-mb 16 --repeat 3 > "$OUT/h5py_throughput.txt" 2>&1 ||
    echo "h5py throughput failed: $(tail -3 "$OUT/h5py_throughput.txt")"
# The same with the default backend choice (AUTO: compression on the GPU; Lorenzo + fast decompression on the CPU
# when it has 12 threads or more, faster there than the GPU's round trip through host memory).
python3 bench/h5py_throughput.py "$TREFHT" --dims 110x64x128 \
    --plugin-dir "$RUN/plugin" --rel 1e-3 --size-gb 2 --chunk-mb 16 --repeat 3 > "$OUT/h5py_throughput_auto.txt" 2>&1 ||
    echo "h5py throughput (auto) failed: $(tail -3 "$OUT/h5py_throughput_auto.txt")"
python3 - "$OUT/bench.jsonl" <<'EOF'
import json, sys
print(f"{'field':36s} {'CR':>6s} {'max/eb':>7s} {'comp kern':>9s} {'decomp kern':>11s} {'comp e2e':>8s} {'decomp e2e':>10s}  (GB/s) {'f %':>6s}")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{r.get('field', '?') + ' (' + str(r.get('predictor')) + '/' + str(r.get('encoder')) + ')':36s} {r['ratio']:6.2f} {r['max_err_over_eb']:7.4f} "
          f"{r['compress_kernel_gbps']:9.1f} {r['decompress_kernel_gbps']:11.1f} {r['compress_gbps']:8.1f} "
          f"{r['decompress_gbps']:10.1f}  {100 * r.get('overhead_f', 0):6.3f}  {r.get('backend')}/{r.get('decompress_backend')}")
EOF

cat "$OUT/bench_sizes.txt" "$OUT/h5py_throughput.txt" "$OUT/h5py_throughput_auto.txt" "$OUT/device_chunks.txt"

timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$RUN/bin/gpu_tests" \
    --gtest_filter='GpuParity.SpecialValues*:GpuParity.Escapes*:GpuParity.Outliers*:GpuDeviceApi.*:GpuCorrupt.TargetedErrors:GpuParity.LorenzoRatioSmoothAndNoisyF32:GpuCorrupt.LorenzoRatio*:GpuBatch.BadChunksFailAlone:GpuBatch.ConcurrentHostCallsGetTheCpuBytes' \
    > "$OUT/memcheck.log" 2>&1
summary memcheck "$OUT/memcheck.log"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$RUN/bin/h5chunks_tests" \
    --gtest_filter='DeviceChunks.*' > "$OUT/memcheck_h5chunks.log" 2>&1
summary "memcheck (h5chunks)" "$OUT/memcheck_h5chunks.log"
timeout 90 compute-sanitizer --tool racecheck "$RUN/bin/gpu_tests" --gtest_filter='GpuParity.SpecialValuesF32' \
    > "$OUT/racecheck.log" 2>&1
summary racecheck "$OUT/racecheck.log"
# The one-pass fast encoder's ring in shared memory, in walks of 3 tiles (every tile after the first reuses it).
ZBOUND_GPU_WALK=3 timeout 120 compute-sanitizer --tool racecheck "$RUN/bin/gpu_tests" \
    --gtest_filter='GpuParity.SpecialValuesF32:GpuParity.EscapesF32' > "$OUT/racecheck_walk.log" 2>&1
summary "racecheck (walk 3)" "$OUT/racecheck_walk.log"
ZBOUND_GPU_WALK=3 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 "$RUN/bin/gpu_tests" \
    --gtest_filter='GpuParity.SpecialValuesF32:GpuParity.EscapesF64:GpuParity.OutliersF32' > "$OUT/memcheck_walk.log" 2>&1
summary "memcheck (walk 3)" "$OUT/memcheck_walk.log"
# gpu_tests under a sanitizer: sanitize TOOL LOG FILTER [VAR=VALUE..] (memcheck exits 1 on an error).
sanitize() {
    local tool=$1 log=$2 filter=$3; shift 3
    local opts=(--tool "$tool"); [ "$tool" = memcheck ] && opts+=(--error-exitcode 1)
    env "$@" timeout 150 compute-sanitizer "${opts[@]}" "$RUN/bin/gpu_tests" --gtest_filter="$filter" \
        > "$OUT/$log.log" 2>&1
    summary "$log" "$OUT/$log.log"
}
# The decoder's z walk cut into parts (sums, their scan, apply); the exception stages in one thread block, both
# directions (a few corruptions: each decode is slow under the sanitizers; repeated calls: graphs, counts on the
# device).
sanitize racecheck racecheck_yz_parts 'GpuParity.EscapesF32:GpuParity.OutliersF32' ZBOUND_GPU_YZ_PARTS=3
sanitize memcheck memcheck_yz_parts 'GpuParity.EscapesF32:GpuParity.OutliersF64' ZBOUND_GPU_YZ_PARTS=3
exceptions_tests='GpuCorrupt.FewExceptionsSameAnswerAsCpu:GpuDeviceApi.RepeatedCallsOnTheSameBuffersF32'
sanitize racecheck racecheck_exceptions "$exceptions_tests" ZBOUND_TEST_SAMPLE=12
sanitize memcheck memcheck_exceptions "$exceptions_tests" ZBOUND_TEST_SAMPLE=12
# The ratio encoder's kernels with run tokens (block scan of the runs across threads, token decoder).
timeout 180 compute-sanitizer --tool memcheck --error-exitcode 1 "$RUN/bin/ratio_tests" \
    --gtest_filter='RatioGpu.ParityRunTokens' > "$OUT/memcheck_runs.log" 2>&1
summary "memcheck (run tokens)" "$OUT/memcheck_runs.log"
timeout 180 compute-sanitizer --tool racecheck "$RUN/bin/ratio_tests" --gtest_filter='RatioGpu.ParityRunTokens' \
    > "$OUT/racecheck_runs.log" 2>&1
summary "racecheck (run tokens)" "$OUT/racecheck_runs.log"
