#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for zbound and builds it into build/. Safe to run again: it installs only what
# is missing and rebuilds incrementally.
#   1. apt packages (HDF5 + tools, netCDF + tools, GoogleTest, CMake, g++) if missing
#   2. Python packages (h5py numpy pytest netCDF4 hdf5plugin) if missing
#   3. cmake configure + build (Release) into build/; the CUDA backend is built when nvcc is found
#      (on PATH or at /usr/local/cuda/bin/nvcc), else a CPU-only build.
#   4. the Python package (pip install .) and its test dependencies in the virtual environment build-venv/
# Environment: ZBOUND_BUILD_DIR (default build), ZBOUND_BUILD_JOBS (default 2), ZBOUND_CUDA=OFF to skip CUDA.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${ZBOUND_BUILD_DIR:-build}
JOBS=${ZBOUND_BUILD_JOBS:-2}
log() { printf '[setup] %s\n' "$*"; }

# ---- 1. system packages ----
apt_pkgs=(cmake make g++ libhdf5-dev hdf5-tools libnetcdf-dev netcdf-bin libgtest-dev)
command -v python3 >/dev/null 2>&1 || apt_pkgs+=(python3)
python3 -m pip --version >/dev/null 2>&1 || apt_pkgs+=(python3-pip)
# The Python package (step 4) lives in a virtual environment; pkg-config finds libnetcdf for examples/nc_filter.c.
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || apt_pkgs+=(python3-venv)
command -v pkg-config >/dev/null 2>&1 || apt_pkgs+=(pkg-config)
# Reliability (issue 6): clang + libFuzzer/sanitizer runtimes + LLVM OpenMP for fuzz/, OpenMPI and the MPI flavour of
# HDF5 for examples/mpi_write_read.c (installed beside the serial HDF5, which the rest of the build keeps using).
apt_pkgs+=(clang libclang-rt-14-dev libomp-dev libopenmpi-dev openmpi-bin libhdf5-openmpi-dev)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  log "installing apt packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  log "apt packages present"
fi
# libhdf5-openmpi-dev makes pkg-config's hdf5.pc point at the MPI flavour: keep the serial one the default, so that
# pkg-config users (netCDF, examples) and everything else link the serial HDF5 as before.
if [ -e /usr/lib/x86_64-linux-gnu/pkgconfig/hdf5-serial.pc ] && command -v update-alternatives >/dev/null 2>&1 &&
   [ "$(id -u)" -eq 0 ]; then
  update-alternatives --set hdf5.pc /usr/lib/x86_64-linux-gnu/pkgconfig/hdf5-serial.pc >/dev/null 2>&1 || true
fi

# ---- 2. Python packages ----
py_missing=()
for spec in h5py:h5py numpy:numpy pytest:pytest netCDF4:netCDF4 hdf5plugin:hdf5plugin; do
  python3 -c "import ${spec%%:*}" >/dev/null 2>&1 || py_missing+=("${spec##*:}")
done
if ((${#py_missing[@]})); then
  log "installing Python packages: ${py_missing[*]}"
  pip_log=$(mktemp)
  if ! python3 -m pip install --quiet "${py_missing[@]}" 2>"$pip_log"; then
    if grep -q externally-managed-environment "$pip_log"; then
      # Debian's own python3 (PEP 668): this machine is set up for zbound only, so install beside apt's packages.
      python3 -m pip install --quiet --break-system-packages "${py_missing[@]}"
    else
      cat "$pip_log" >&2
      exit 1
    fi
  fi
  rm -f "$pip_log"
else
  log "Python packages present"
fi

# ---- 3. configure + build ----
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
if [ "${ZBOUND_CUDA:-}" = "OFF" ]; then
  cmake_args+=(-DZBOUND_CUDA=OFF)
else
  nvcc_path=$(command -v nvcc 2>/dev/null || true)
  if [ -z "$nvcc_path" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc_path=/usr/local/cuda/bin/nvcc; fi
  if [ -n "$nvcc_path" ]; then
    PATH="$(dirname "$nvcc_path"):$PATH"
    export PATH
    cmake_args+=(-DCMAKE_CUDA_COMPILER="$nvcc_path")
    log "CUDA backend: building with $nvcc_path"
  else
    log "CUDA backend: nvcc not found, CPU-only build"
  fi
fi
log "configuring $BUILD_DIR"
cmake -S . -B "$BUILD_DIR" "${cmake_args[@]}"
log "building $BUILD_DIR with $JOBS jobs"
start=$(date +%s)
cmake --build "$BUILD_DIR" -j "$JOBS"
log "build done in $(( $(date +%s) - start )) s: $BUILD_DIR/bin/zbound, $BUILD_DIR/plugin/libh5z_zbound.so"

# ---- 4. the Python package in a virtual environment ----
# ZBOUND_VENV (default build-venv) gets the package's test dependencies (python/requirements-test.txt: zarr,
# numcodecs, dask[distributed], xarray, h5netcdf, matplotlib, hdf5plugin, netCDF4, pytest) and `pip install .`
# (CMake builds the library, the HDF5 plugin and the CLI into the package, CPU only, compile cache in build-py/).
# Use it with: source build-venv/bin/activate. ZBOUND_VENV=OFF skips this step.
VENV=${ZBOUND_VENV:-build-venv}
if [ "$VENV" != "OFF" ]; then
  start=$(date +%s)
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -r python/requirements-test.txt
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$VENV/bin/python" -m pip install --quiet .
  log "Python package installed in $VENV in $(( $(date +%s) - start )) s (source $VENV/bin/activate)"
fi
