"""Device-resident HDF5 chunk I/O (issue 4, criterion 5): a CuPy array of --size-gb written with zbound.write_chunks
(chunks compressed on the GPU, stored with H5Dwrite_chunk) and read back with zbound.read_chunks(device=True), the
file in /dev/shm; then read through the plugin on the CPU and compared bit for bit with the device read.

    python3 bench/device_chunks_bench.py FIELD.raw --dims 110x64x128 [--size-gb 4] [--chunk-mb 64] [--rel 1e-3]
"""
import argparse
import os
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw")
    ap.add_argument("--dims", required=True)
    ap.add_argument("--size-gb", type=float, default=4.0)
    ap.add_argument("--chunk-mb", type=float, default=64.0)
    ap.add_argument("--rel", type=float, default=1e-3)
    ap.add_argument("--path", default="/dev/shm/zb_device_chunks.h5")
    args = ap.parse_args()
    import cupy as cp
    import h5py
    import zbound

    dims = [int(v) for v in args.dims.split("x")]
    base = np.fromfile(args.raw, dtype=np.float32).reshape(dims)
    slab = base.nbytes // dims[0]
    rows = int(args.size_gb * 1e9) // slab
    host = np.concatenate([base] * (-(-rows // dims[0])))[:rows]
    fin = host[np.isfinite(host)]
    eb = args.rel * float(fin.max() - fin.min())
    dev = cp.asarray(host)
    chunk_rows = max(1, int(args.chunk_mb * 1e6) // slab)
    kw = dict(shape=host.shape, dtype=host.dtype, chunks=(chunk_rows,) + host.shape[1:],
              **zbound.Filter(abs=eb, predictor="lorenzo", encoder="fast"))
    with h5py.File(args.path, "w") as f:   # warm-up: the GPU context and the first allocations
        ds = f.create_dataset("x", **dict(kw, shape=(chunk_rows,) + host.shape[1:]))
        zbound.write_chunks(ds, dev[:chunk_rows])
    times = {}
    with h5py.File(args.path, "w") as f:
        ds = f.create_dataset("x", **kw)
        cp.cuda.runtime.deviceSynchronize()
        t0 = time.perf_counter()
        zbound.write_chunks(ds, dev)
        times["write"] = time.perf_counter() - t0
    size = os.path.getsize(args.path)
    with h5py.File(args.path, "r") as f:
        t0 = time.perf_counter()
        back = zbound.read_chunks(f["x"], device=True)
        cp.cuda.runtime.deviceSynchronize()
        times["read"] = time.perf_counter() - t0
        os.environ["ZBOUND_BACKEND"] = "cpu"
        t0 = time.perf_counter()
        cpu = f["x"][...]
        times["cpu read (plugin)"] = time.perf_counter() - t0
    os.remove(args.path)
    gb = host.nbytes / 1e9
    same = np.array_equal(cp.asnumpy(back).view(np.uint32), cpu.view(np.uint32))
    err = float(np.max(np.abs(cpu.astype(np.float64) - host)))
    for k, t in times.items():
        print(f"{k:18s} {gb:.2f} GB in {t:.3f} s = {gb / t:.2f} GB/s")
    print(f"{chunk_rows * slab / 1e6:.1f} MB chunks, CR {host.nbytes / size:.2f}, max err / eb {err / eb:.4f}, "
          f"device read identical to the CPU plugin read: {same}")
    if not same or err > eb:
        sys.exit(1)


if __name__ == "__main__":
    main()
