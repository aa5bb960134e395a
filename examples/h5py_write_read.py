"""Writes a float array through the zbound HDF5 filter with h5py, reads it back, prints ratio and max error.

    HDF5_PLUGIN_PATH=/path/to/build/plugin python h5py_write_read.py [out.h5] [abs_bound]

h5py adds filters as optional: if HDF5 cannot find the plugin, or the dataset is not float32/float64, the data is
stored unfiltered without an error. This script checks that the filter was really applied.
REL bounds (mode 1) are relative to each chunk's value range; for a bound relative to the whole array, compute
it here and pass it as ABS, as below.
"""

import struct
import sys

import h5py
import numpy as np

ZBOUND_FILTER_ID = 33000  # ZBOUND_H5Z_FILTER in filter/zbound_filter.h


def zbound_opts(mode, bound, predictor=0, encoder=0):
    """cd_values: [layout 1, mode (0 abs, 1 rel), bound high word, bound low word, predictor, encoder]."""
    bits = struct.unpack("<Q", struct.pack("<d", bound))[0]
    return (1, mode, bits >> 32, bits & 0xFFFFFFFF, predictor, encoder)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "zbound_h5py_example.h5"
    rel = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-4
    if not h5py.h5z.filter_avail(ZBOUND_FILTER_ID):
        sys.exit("zbound filter not found: set HDF5_PLUGIN_PATH to the folder holding libh5z_zbound.so")

    y, x = np.mgrid[0:720, 0:1440]
    data = (15 + 10 * np.sin(x / 90.0) * np.cos(y / 60.0)).astype(np.float32)
    data[:100, :300] = np.nan  # a masked region comes back as NaN, bit for bit
    finite = data[np.isfinite(data)]
    bound = rel * float(finite.max() - finite.min())

    with h5py.File(path, "w") as f:
        ds = f.create_dataset("sst", data=data, chunks=(256, 256), compression=ZBOUND_FILTER_ID,
                              compression_opts=zbound_opts(0, bound))
        if any(ds.id.get_chunk_info(i).filter_mask for i in range(ds.id.get_num_chunks())):
            sys.exit("some chunks were stored without the filter")
        stored = ds.id.get_storage_size()
    with h5py.File(path, "r") as f:
        back = f["sst"][...]
    ok = np.isfinite(data)
    err = float(np.abs(back[ok].astype(np.float64) - data[ok]).max())
    print(f"{path}: ratio {data.nbytes / stored:.2f}, max error {err:.3g} (bound {bound:.3g}), "
          f"NaN kept: {bool(np.isnan(back[~ok]).all())}")
    sys.exit(0 if err <= bound else 1)


if __name__ == "__main__":
    main()
