#!/usr/bin/env python3
"""zbound's main job on real data: write a climate field through the zbound HDF5 filter with h5py, read it back.

The field is CESM near-surface air temperature (TREFHT, K), four ensemble members stacked into 440 x 64 x 128 f32,
from ../shared/data. It is written as a chunked dataset (one member of 110 time steps per chunk) with the filter
(id 33000, cd_values from `zbound cdvalues`), read back with plain h5py, and every value is checked against the
bound. The bound is given relative to the whole field's value range and converted to an absolute bound, since
HDF5 compresses chunks independently and zbound's REL mode is relative to each chunk.

    HDF5_PLUGIN_PATH=build/plugin python3 scripts/demo.py [--rel 1e-2,1e-3,1e-4] [--out build/demo]

Exits non-zero if the plugin is missing or any value breaks the bound.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("ZBOUND_BUILD_DIR", "build"))
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
FILTER_ID = 33000  # ZBOUND_H5Z_FILTER in filter/zbound_filter.h

# HDF5 reads HDF5_PLUGIN_PATH when it starts: set it before h5py is imported if the command did not.
os.environ.setdefault("HDF5_PLUGIN_PATH", os.path.join(BUILD, "plugin"))

import numpy as np  # noqa: E402
import h5py  # noqa: E402


def fail(msg):
    print(f"demo: error: {msg}", file=sys.stderr)
    sys.exit(1)


def load_trefht():
    import netCDF4
    members = []
    for m in (57, 59, 60, 61):
        path = os.path.join(DATA, f"cesm_trefht_b06_{m}.nc")
        if not os.path.isfile(path):
            fail(f"real data not found: {path} (the repository expects ../shared/data beside it)")
        with netCDF4.Dataset(path) as d:
            v = d["TREFHT"]
            v.set_auto_mask(False)
            members.append(np.asarray(v[:], dtype=np.float32))
    return np.ascontiguousarray(np.concatenate(members))


def cd_values(abs_bound):
    """The filter's cd_values for an absolute bound, from the filter's own encoder via the CLI."""
    zbound = os.path.join(BUILD, "bin", "zbound")
    if not os.access(zbound, os.X_OK):
        fail(f"{zbound} not found: run 'bash scripts/setup.sh' first")
    out = subprocess.run([zbound, "cdvalues", "--abs", repr(abs_bound), "--format", "words"],
                         capture_output=True, text=True, check=True).stdout
    return tuple(int(w) for w in out.strip().split(","))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rel", default="1e-2,1e-3,1e-4", help="bounds relative to the field's value range")
    ap.add_argument("--out", default=os.path.join(BUILD, "demo"), help="folder for the HDF5 files")
    args = ap.parse_args()

    plugin_dir = os.environ["HDF5_PLUGIN_PATH"]
    if not h5py.h5z.filter_avail(FILTER_ID):
        fail(f"the zbound filter ({FILTER_ID}) is not available: HDF5_PLUGIN_PATH={plugin_dir} must hold "
             f"libh5z_zbound.so (run 'bash scripts/setup.sh')")

    a = load_trefht()
    vrange = float(a.max()) - float(a.min())
    chunks = (110, 64, 128)
    os.makedirs(args.out, exist_ok=True)
    print(f"zbound demo: CESM TREFHT, 4 members stacked, {a.shape[0]}x{a.shape[1]}x{a.shape[2]} f32 "
          f"({a.nbytes / 1e6:.1f} MB), chunks {chunks}, value range {vrange:.3f} K")
    print(f"HDF5 {h5py.version.hdf5_version} (h5py {h5py.version.version}), plugin from {plugin_dir}\n")
    print(f"{'rel eb':>7} {'abs eb (K)':>11} {'ratio':>7} {'max error (K)':>14} {'max err/eb':>10} "
          f"{'write MB/s':>10} {'read MB/s':>9}  file")

    ok = True
    for rel in (float(r) for r in args.rel.split(",")):
        eb = rel * vrange
        path = os.path.join(args.out, f"trefht_rel{rel:g}.h5")
        opts = cd_values(eb)
        t0 = time.perf_counter()
        with h5py.File(path, "w") as f:
            ds = f.create_dataset("TREFHT", data=a, chunks=chunks, compression=FILTER_ID, compression_opts=opts)
            ds.attrs["units"] = "K"
            stored = ds.id.get_storage_size()
        t1 = time.perf_counter()
        with h5py.File(path, "r") as f:
            back = f["TREFHT"][...]
        t2 = time.perf_counter()
        err = np.abs(a.astype(np.float64) - back.astype(np.float64))
        max_err = float(err.max())
        held = back.shape == a.shape and max_err <= eb
        ok &= held
        print(f"{rel:>7g} {eb:>11.6g} {a.nbytes / stored:>7.2f} {max_err:>14.6g} {max_err / eb:>10.4f} "
              f"{a.nbytes / (t1 - t0) / 1e6:>10.1f} {a.nbytes / (t2 - t1) / 1e6:>9.1f}  {path}"
              + ("" if held else "  BOUND VIOLATED"))

    print("\nratio = raw bytes / stored chunk bytes; write and read times include HDF5 and file I/O.")
    if not ok:
        fail("a value read back differs from the value written by more than the bound")
    print("every value read back is within the bound.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
