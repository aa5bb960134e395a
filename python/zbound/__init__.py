"""zbound: error-bounded lossy compression of float32/float64 arrays.

    import zbound, h5py
    with h5py.File("out.h5", "w") as f:                       # the bundled HDF5 plugin is registered on import
        f.create_dataset("T", data=a, chunks=(64, 64), **zbound.Filter(abs=1e-3))
    b = zbound.compress(a, rel=1e-4); back = zbound.decompress(b, shape=a.shape)
    zarr v2: compressor=zbound.Zbound(abs=1e-3); zarr v3: serializer=zbound.ZboundCodec(abs=1e-3)

Guarantee: every finite value x that is not the fill value comes back as x' with |x - x'| <= the absolute bound
recorded in the stream (abs, or rel * (max - min) of the finite values of one array / HDF5 chunk / zarr chunk);
NaN, +-Inf, -0.0 and the fill value come back bit for bit.

PLUGIN_PATH is the folder of the bundled plugin (libh5z_zbound.so), for HDF5_PLUGIN_PATH in other programs:
    HDF5_PLUGIN_PATH=$(python -c "import zbound; print(zbound.PLUGIN_PATH)") h5dump -d /T out.h5
"""
import os as _os

# libzbound runs OpenMP threads. libgomp's default is to spin while waiting, which on a busy machine (Dask workers,
# a shared node) made whole-file repacks five times slower (measured on 2 cores under load: 10.3 s vs 1.9 s). Sleeping
# threads cost a few microseconds per chunk instead. Read by libgomp when it is loaded, i.e. on first use below; set
# OMP_WAIT_POLICY=active to override.
_os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from ._lib import CorruptStreamError, GpuError, UnsupportedError, ZboundError  # noqa: F401
from ._api import compress, decompress, gpu_available, stream_info  # noqa: F401
from ._filter import FILTER_ID, Filter, cd_values, parse_cd_values  # noqa: F401
from ._h5 import PLUGIN_FILE, PLUGIN_PATH, register_h5py  # noqa: F401
from .direct import read_chunks, write_chunks  # noqa: F401

__version__ = "0.1.0"

__all__ = [
    "FILTER_ID", "PLUGIN_PATH", "PLUGIN_FILE", "Filter", "compress", "decompress", "stream_info", "cd_values",
    "gpu_available", "register_h5py", "write_chunks", "read_chunks", "ZboundError", "UnsupportedError",
    "CorruptStreamError", "GpuError",
    "Zbound", "ZboundCodec",
]


def _register():
    try:
        import h5py  # noqa: F401
    except ImportError:  # h5py is a dependency; without it only the array API is available
        pass
    else:
        register_h5py()
    try:
        from .codec import Zbound, register_numcodecs
    except ImportError:  # numcodecs not installed
        pass
    else:
        register_numcodecs()
        globals()["Zbound"] = Zbound


_register()


def __getattr__(name):
    # Zarr is imported only when its codec is asked for (it is slow to import); zarr itself finds the codec
    # through the 'zarr.codecs' entry point.
    if name == "ZboundCodec":
        from .zarr3 import ZboundCodec, register_zarr
        register_zarr()
        return ZboundCodec
    raise AttributeError(f"module 'zbound' has no attribute {name!r}")
