#!/usr/bin/env bash
# Reliability checks on the device machine (issue 6), after `bash bench/device_check.sh pack` here (which also packs
# the rel_* test programs and, when built, examples/mpi_write_read). Writes logs to $OUT; prints one line per check.
#   bash bench/device_rel.sh            GPU resource faults, 8 threads on the GPU, archived HDF5 files decoded on the
#                                       GPU, compute-sanitizer racecheck/initcheck on the interp and ratio kernels
#   bash bench/device_rel.sh pack-mpi   (here) packs the example, the plugin and Debian's OpenMPI runtime into .devmpi
#   bash bench/device_rel.sh mpi        (device) the parallel HDF5 example, one rank per GPU
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUN=${ZB_DEVRUN:-.devrun}
OUT=${OUT:-/tmp/zbound-device}
mkdir -p "$OUT"
root=$(pwd)
[ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
[ -e /work/shared/data ] || { mkdir -p /work/shared && ln -s "$root/$RUN/data" /work/shared/data; }
summary() { echo "$1: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? passed|failed|ERROR SUMMARY|RACECHECK SUMMARY' "$2" | tr '\n' ' ')"; }
B="$RUN/bin"

if [ "${1:-}" = pack-mpi ]; then
    # The device has no MPI: carry Debian's OpenMPI runtime and parallel HDF5 (every shared library the example and
    # mpirun need, the MCA/PMIx components, help texts and config) as one archive of absolute paths; `mpi` unpacks
    # it with --skip-old-files, so libraries the device already has stay its own.
    D=.devmpi
    rm -rf "$D" && mkdir -p "$D/bin"
    cp build-gpu/examples/mpi_write_read "$D/bin/" && strip "$D/bin/mpi_write_read"
    cp build-gpu/plugin/*.so "$D/bin/"
    list=$(mktemp)
    dirs="/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi"
    { for d in $dirs; do [ -e "$d" ] && echo "$d"; done
      readlink -f /usr/bin/mpirun; echo /usr/bin/mpirun; echo /usr/bin/orted
      for f in build-gpu/examples/mpi_write_read /usr/bin/orted "$(readlink -f /usr/bin/mpirun)" \
               $(find /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 -name '*.so*' -type f); do
          ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
      done | sort -u | while read -r l; do echo "$l"; readlink -f "$l"; done
    } | sort -u > "$list"
    tar czf "$D/mpi.tgz" -P -T "$list" 2>/dev/null
    mkdir -p .git/info && { grep -qx "/$D/" .git/info/exclude 2>/dev/null || echo "/$D/" >> .git/info/exclude; }
    du -sh "$D"
    exit 0
fi

if [ "${1:-}" = mpi ]; then
    ngpu=$(nvidia-smi -L | wc -l)
    B=.devmpi/bin
    # The example needs Debian's parallel HDF5 (and maybe OpenMPI): unpack what the machine lacks.
    if ldd "$B/mpi_write_read" | grep -q "not found" || ! command -v mpirun >/dev/null; then
        [ -f .devmpi/mpi.tgz ] && tar xzf .devmpi/mpi.tgz -P --skip-old-files 2>/dev/null; ldconfig
    fi
    ldd "$B/mpi_write_read" | grep "not found"
    # Open MPI's launcher (the example is linked with Open MPI): orterun where mpirun is another MPI's.
    MPIRUN=$(command -v orterun || command -v mpirun) || { echo "mpi: no mpirun on this machine"; exit 0; }
    echo "mpi: $MPIRUN: $($MPIRUN --version 2>&1 | head -1)"
    export HDF5_PLUGIN_PATH="$root/$B" OMPI_MCA_btl=self,vader OMPI_MCA_plm_rsh_agent=false
    # One rank per GPU, 2 GiB of f32 per rank in 16 MiB chunks, lorenzo + fast (the example pins it); then the same
    # with ZBOUND_BACKEND=cpu for comparison. nvidia-smi samples which GPUs hold a process meanwhile.
    for backend in auto cpu; do
        nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader -lms 200 \
            > "$OUT/mpi_apps_$backend.log" 2>&1 &
        smi=$!
        ZBOUND_BACKEND=$backend "$MPIRUN" --allow-run-as-root -np "$ngpu" \
            sh -c 'ZBOUND_DEVICE=$OMPI_COMM_WORLD_LOCAL_RANK exec "$0" "$@"' \
            "$B/mpi_write_read" /dev/shm/zb_mpi.h5 16384 32768 1024 4096 > "$OUT/mpi_$backend.log" 2>&1
        rc=$?
        kill $smi 2>/dev/null; wait $smi 2>/dev/null
        echo "mpi ($ngpu ranks, ZBOUND_BACKEND=$backend): rc $rc $(grep -E 'write|read|OK|FAIL' "$OUT/mpi_$backend.log" | tr '\n' ' ')"
        echo "  GPUs holding an MPI rank: $(awk -F', ' '{print $2}' "$OUT/mpi_apps_$backend.log" | grep -c . ) samples, distinct $(awk -F', ' '{print $2}' "$OUT/mpi_apps_$backend.log" | grep GPU | sort -u | wc -l)"
    done
    rm -f /dev/shm/zb_mpi.h5
    exit 0
fi

# GPU resource faults: each knob setting in its own process (the backend reads its knobs once).
run_fault() {   # name gtest-filter [VAR=value ...]
    local name=$1 filter=$2; shift 2
    env "$@" "$B/rel_gpu_fault_tests" --gtest_filter="$filter" > "$OUT/fault_$name.log" 2>&1
    echo "  (exit $?)" >> "$OUT/fault_$name.log"
    summary "fault $name" "$OUT/fault_$name.log"
}
run_fault mem_limit 'GpuMemLimit.*' ZBOUND_GPU_MEM_LIMIT=8388608 ZBOUND_GPU_MIN_BYTES=0
for n in 0 3 10 40; do run_fault "after_$n" 'GpuFault.*' ZBOUND_GPU_FAULT_AFTER=$n ZBOUND_GPU_MIN_BYTES=0; done
run_fault larger_than_free 'GpuLargerThanFree.*'
run_fault hidden 'NoGpu.*' CUDA_VISIBLE_DEVICES= ZBOUND_REL_NO_GPU=1 ZBOUND_GPU_MIN_BYTES=0
run_fault bad_index 'NoGpu.*' ZBOUND_DEVICE=99 ZBOUND_REL_NO_GPU=1 ZBOUND_GPU_MIN_BYTES=0

HDF5_PLUGIN_PATH="$root/$RUN/plugin" "$B/rel_thread_tests" > "$OUT/threads.log" 2>&1
summary "thread safety (CPU and GPU)" "$OUT/threads.log"
# HDF5's file locking fails on some device filesystems ("open failed"): the archives are only read here.
HDF5_USE_FILE_LOCKING=FALSE HDF5_PLUGIN_PATH="$root/$RUN/plugin" ZBOUND_BACKEND=gpu ZBOUND_GPU_MIN_BYTES=0 ZBOUND_LOG=1 \
    "$B/rel_golden_h5_tests" > "$OUT/golden_gpu.log" 2>&1
summary "archived HDF5 files v1/v2/v3 on the GPU" "$OUT/golden_gpu.log"
echo "  CPU fallbacks logged: $(grep -c 'using the CPU' "$OUT/golden_gpu.log")"

timeout 100 compute-sanitizer --tool racecheck "$B/gpu_tests" --gtest_filter='*GpuInterp.EdgeCases*:*GpuInterp.AutoPredictor*' \
    > "$OUT/racecheck_interp.log" 2>&1
summary "racecheck interp" "$OUT/racecheck_interp.log"
timeout 100 compute-sanitizer --tool racecheck "$B/ratio_tests" --gtest_filter='RatioGpu.ParitySyntheticAndEdgeCases' \
    > "$OUT/racecheck_ratio.log" 2>&1
summary "racecheck ratio" "$OUT/racecheck_ratio.log"
timeout 100 compute-sanitizer --tool initcheck --error-exitcode 1 "$B/gpu_tests" \
    --gtest_filter='GpuParity.SpecialValues*:GpuParity.Escapes*:GpuDeviceApi.*:*GpuInterp.EdgeCases*' > "$OUT/initcheck.log" 2>&1
summary initcheck "$OUT/initcheck.log"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu_tests" \
    --gtest_filter='*GpuInterp.EdgeCases*:*GpuInterp.CorruptStreamsF32*' > "$OUT/memcheck_interp.log" 2>&1
summary "memcheck interp" "$OUT/memcheck_interp.log"
