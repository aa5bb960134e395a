"""Writes a GPU array (CuPy) to HDF5 with zbound chunks compressed on the GPU, reads it back into GPU memory, and
checks it against a read through the plugin on the CPU. Without CuPy or a GPU it does the same from host memory.

    python examples/device_chunks.py [out.h5]          # needs the zbound Python package (pip install .)

zbound.write_chunks compresses each chunk itself (GPU for a device array, all CPU cores for a numpy array) and
stores it with H5Dwrite_chunk; the streams are exactly those the filter writes, so any HDF5 program with the
plugin reads the file.
"""
import sys

import h5py
import numpy as np
import zbound


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "zbound_device_chunks.h5"
    z, y, x = np.meshgrid(np.arange(64), np.arange(256), np.arange(256), indexing="ij")
    host = (np.sin(x / 17.0) * np.cos(y / 23.0) + 0.01 * z).astype(np.float32)
    try:
        import cupy as cp
        use_gpu = zbound.gpu_available()
    except ImportError:
        use_gpu = False
    data = cp.asarray(host) if use_gpu else host
    eb = 1e-3
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("field", shape=host.shape, dtype=host.dtype, chunks=(16, 256, 256),
                              **zbound.Filter(abs=eb))
        zbound.write_chunks(ds, data)
    with h5py.File(path, "r") as f:
        back = zbound.read_chunks(f["field"], device=use_gpu)
        through_plugin = f["field"][...]            # the filter on the CPU
        stored = sum(f["field"].id.get_chunk_info(i).size for i in range(f["field"].id.get_num_chunks()))
    back = cp.asnumpy(back) if use_gpu else back
    err = float(np.max(np.abs(through_plugin.astype(np.float64) - host)))
    same = np.array_equal(back.view(np.uint32), through_plugin.view(np.uint32))
    print(f"{'GPU' if use_gpu else 'CPU'}: ratio {host.nbytes / stored:.1f}, max error {err:.3g} (bound {eb}), "
          f"read_chunks identical to the plugin's read: {same}")
    if err > eb or not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
