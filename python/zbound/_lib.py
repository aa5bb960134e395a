"""ctypes bindings of libzbound (core/include/zbound.h): the structs, the calls, and errors as Python exceptions.

The library is the one bundled in the package (zbound/lib/libzbound.so); ZBOUND_LIBRARY may name another build
(for example build/cuda/libzbound.so of a CUDA build). ctypes releases the GIL during each call, so threads (Dask,
zarr) compress in parallel.
"""
import ctypes
import os
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_PATH = os.environ.get("ZBOUND_LIBRARY") or os.path.join(_HERE, "lib", "libzbound.so")

# zb_status (zbound.h)
ZB_OK = 0
STATUS_NAMES = {
    0: "ZB_OK", 1: "ZB_ERR_INVALID_ARG", 2: "ZB_ERR_DTYPE", 3: "ZB_ERR_BUFFER_TOO_SMALL", 4: "ZB_ERR_CORRUPT",
    5: "ZB_ERR_TRUNCATED", 6: "ZB_ERR_VERSION", 7: "ZB_ERR_NOMEM", 8: "ZB_ERR_GPU", 9: "ZB_ERR_UNSUPPORTED",
    10: "ZB_ERR_INTERNAL",
}
ZB_F32, ZB_F64 = 1, 2
MODES = {"abs": 0, "rel": 1, "pw_rel": 2}
PREDICTORS = {"auto": 0, "lorenzo": 1, "interp": 2}
ENCODERS = {"auto": 0, "fast": 1, "ratio": 2}
BACKENDS = {"auto": 0, "cpu": 1, "gpu": 2}


class ZboundError(RuntimeError):
    """A libzbound call failed. `status` is the zb_status code, `status_name` its name, the message is the
    library's own (zb_last_error())."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status
        self.status_name = STATUS_NAMES.get(status, str(status))


class UnsupportedError(ZboundError, NotImplementedError):
    """ZB_ERR_UNSUPPORTED: the feature is not in this build (for example the device API without a CUDA build)."""


class CorruptStreamError(ZboundError, ValueError):
    """ZB_ERR_CORRUPT / ZB_ERR_TRUNCATED / ZB_ERR_VERSION: the bytes are not a stream this library can decode."""


class GpuError(ZboundError):
    """ZB_ERR_GPU: the GPU was required (device arrays) and failed or is missing."""


def _error_class(status):
    if status == 9:
        return UnsupportedError
    if status in (4, 5, 6):
        return CorruptStreamError
    if status == 8:
        return GpuError
    return ZboundError


class Params(ctypes.Structure):
    _fields_ = [
        ("mode", ctypes.c_int),
        ("bound", ctypes.c_double),
        ("predictor", ctypes.c_int),
        ("encoder", ctypes.c_int),
        ("backend", ctypes.c_int),
        ("has_fill", ctypes.c_int),
        ("fill_bits", ctypes.c_uint64),
        ("threads", ctypes.c_int),
    ]


class RunStats(ctypes.Structure):
    _fields_ = [
        ("backend_used", ctypes.c_int),
        ("kernel_seconds", ctypes.c_double),
        ("total_seconds", ctypes.c_double),
        ("bytes_in", ctypes.c_size_t),
        ("bytes_out", ctypes.c_size_t),
    ]


class StreamInfo(ctypes.Structure):
    _fields_ = [
        ("format_version", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("dims", ctypes.c_uint64 * 3),
        ("n", ctypes.c_uint64),
        ("decompressed_bytes", ctypes.c_size_t),
        ("stream_bytes", ctypes.c_size_t),
        ("mode", ctypes.c_int),
        ("bound", ctypes.c_double),
        ("abs_bound", ctypes.c_double),
        ("predictor", ctypes.c_int),
        ("encoder", ctypes.c_int),
        ("raw", ctypes.c_int),
        ("escapes", ctypes.c_uint64),
        ("exceptions", ctypes.c_uint64),
        ("exception_runs", ctypes.c_uint64),
        ("nonzero_code_blocks", ctypes.c_uint64),
        ("ratio_metadata_bytes", ctypes.c_uint64),
        ("ratio_payload_bytes", ctypes.c_uint64),
    ]


_lib = None
_lock = threading.Lock()


def lib():
    """The loaded libzbound (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            if not os.path.isfile(LIBRARY_PATH):
                raise ImportError(
                    f"zbound: {LIBRARY_PATH} is missing; the package was not built with its library "
                    f"(reinstall with `pip install .` from the zbound repository, or set ZBOUND_LIBRARY)")
            L = ctypes.CDLL(LIBRARY_PATH)
            sz, vp = ctypes.c_size_t, ctypes.c_void_p
            P = ctypes.POINTER
            L.zb_params_default.restype = Params
            L.zb_params_default.argtypes = []
            L.zb_compress_bound.restype = sz
            L.zb_compress_bound.argtypes = [ctypes.c_int, sz]
            L.zb_compress.restype = ctypes.c_int
            L.zb_compress.argtypes = [P(Params), ctypes.c_int, vp, ctypes.c_int, P(sz), vp, sz, P(sz), P(RunStats)]
            L.zb_stream_info_get.restype = ctypes.c_int
            L.zb_stream_info_get.argtypes = [vp, sz, P(StreamInfo)]
            L.zb_decompress.restype = ctypes.c_int
            L.zb_decompress.argtypes = [vp, sz, vp, sz, ctypes.c_int, P(RunStats)]
            L.zb_decompress_threads.restype = ctypes.c_int
            L.zb_decompress_threads.argtypes = [vp, sz, vp, sz, ctypes.c_int, ctypes.c_int, P(RunStats)]
            L.zb_compress_device.restype = ctypes.c_int
            L.zb_compress_device.argtypes = [P(Params), ctypes.c_int, vp, ctypes.c_int, P(sz), vp, sz, P(sz), vp,
                                             P(RunStats)]
            L.zb_decompress_device.restype = ctypes.c_int
            L.zb_decompress_device.argtypes = [vp, sz, vp, sz, vp, P(RunStats)]
            L.zb_compress_device_batch.restype = ctypes.c_int
            L.zb_compress_device_batch.argtypes = [P(Params), ctypes.c_int, ctypes.c_int, P(sz), sz, P(vp), P(vp), sz,
                                                   P(sz), P(ctypes.c_int), vp, P(RunStats)]
            L.zb_decompress_device_batch.restype = ctypes.c_int
            L.zb_decompress_device_batch.argtypes = [sz, P(vp), P(sz), P(vp), sz, P(ctypes.c_int), vp, P(RunStats)]
            L.zb_gpu_available.restype = ctypes.c_int
            L.zb_gpu_available.argtypes = []
            L.zb_status_string.restype = ctypes.c_char_p
            L.zb_status_string.argtypes = [ctypes.c_int]
            L.zb_last_error.restype = ctypes.c_char_p
            L.zb_last_error.argtypes = []
            _lib = L
    return _lib


def check(status, what):
    """Raises the exception for a failed call, with zb_last_error()'s message (read on the calling thread, where
    the library keeps it)."""
    if status == ZB_OK:
        return
    L = lib()
    detail = (L.zb_last_error() or b"").decode("utf-8", "replace")
    short = (L.zb_status_string(status) or b"").decode("utf-8", "replace")
    msg = f"{what}: {detail or short} ({STATUS_NAMES.get(status, status)})"
    raise _error_class(status)(msg, status)


def make_params(mode="abs", bound=1e-3, predictor="auto", encoder="auto", backend="auto", fill=None, dtype=None,
                threads=0):
    """A zb_params from Python values (names as in zbound.h, lower case). `fill` is a fill value kept exactly."""
    import numpy as np

    def pick(table, value, what):
        if isinstance(value, str):
            if value not in table:
                raise ValueError(f"zbound: {what} must be one of {', '.join(table)}; got {value!r}")
            return table[value]
        raise TypeError(f"zbound: {what} must be a string ({', '.join(table)}); got {value!r}")

    p = lib().zb_params_default()
    p.mode = pick(MODES, mode, "mode")
    p.bound = float(bound)
    p.predictor = pick(PREDICTORS, predictor, "predictor")
    p.encoder = pick(ENCODERS, encoder, "encoder")
    p.backend = pick(BACKENDS, backend, "backend")
    p.threads = int(threads)
    if fill is not None:
        if dtype is None:
            raise ValueError("zbound: a fill value needs the array's dtype")
        f = np.array([fill], dtype=np.dtype(dtype).newbyteorder("="))
        p.has_fill = 1
        p.fill_bits = int(f.view(np.uint64 if f.itemsize == 8 else np.uint32)[0])
    return p
