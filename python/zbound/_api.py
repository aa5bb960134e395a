"""zbound.compress / zbound.decompress for numpy arrays and for device arrays (CuPy or anything with
__cuda_array_interface__), over the C API through ctypes."""
import ctypes
import struct

import numpy as np

from . import _lib
from ._lib import ZboundError, check, lib

HEADER_FIXED_BYTES = 8  # magic (4), format version (2), header size (2): enough to learn the header's length


def _dtype_code(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize == 4:
        return _lib.ZB_F32
    if dtype.kind == "f" and dtype.itemsize == 8:
        return _lib.ZB_F64
    raise TypeError(f"zbound compresses float32 and float64 arrays only; got dtype {dtype}")


def _dims(shape):
    return (ctypes.c_size_t * max(len(shape), 1))(*[int(d) for d in shape] or [1])


def _mode_and_bound(abs, rel, pw_rel, default_rel=None):
    given = [(m, v) for m, v in (("abs", abs), ("rel", rel), ("pw_rel", pw_rel)) if v is not None]
    if not given and default_rel is not None:
        return "rel", float(default_rel)
    if len(given) != 1:
        raise ValueError("zbound: give exactly one error bound: abs=..., rel=... or pw_rel=...")
    mode, v = given[0]
    v = float(v)
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"zbound: the {mode} bound must be a finite number >= 0; got {v!r}")
    return mode, v


def is_device_array(a):
    return hasattr(a, "__cuda_array_interface__") and not isinstance(a, np.ndarray)


def compress(a, abs=None, rel=None, pw_rel=None, predictor="auto", encoder="auto", backend="auto", fill=None,
             threads=0, stream=None):
    """Compresses a float32/float64 array into a zbound stream (docs/FORMAT.md): `bytes` for a numpy array, a
    device uint8 array (CuPy) for a device array (through zb_compress_device; needs a CUDA build and a GPU).

    Exactly one bound: abs= (|x - x'| <= abs), rel= (relative to this array's finite value range), pw_rel=
    (point-wise relative: |x - x'| <= pw_rel * |x| on every value, zeros and signs exact; format v5; numpy or
    device arrays).
    fill= is a value kept bit for bit and left out of the rel range. The stream records the shape with unit dims
    dropped and more than three dims folded; decompress(b, shape=a.shape) gives the original shape back.
    """
    mode, bound = _mode_and_bound(abs, rel, pw_rel)
    if is_device_array(a):
        return _compress_device(a, mode, bound, predictor, encoder, fill, threads, stream)
    arr = np.asarray(a)
    code = _dtype_code(arr.dtype)
    arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    if arr.size == 0:
        raise ValueError("zbound: cannot compress an empty array")
    p = _lib.make_params(mode, bound, predictor, encoder, backend, fill, arr.dtype, threads)
    L = lib()
    cap = L.zb_compress_bound(code, arr.size)
    out = np.empty(cap, dtype=np.uint8)
    n = ctypes.c_size_t(0)
    st = L.zb_compress(ctypes.byref(p), code, arr.ctypes.data, arr.ndim, _dims(arr.shape), out.ctypes.data, cap,
                       ctypes.byref(n), None)
    check(st, "zbound.compress")
    return out[: n.value].tobytes()


def stream_info(b):
    """The header of a stream as a dict (zb_stream_info: dtype, shape, bound, abs_bound, ...)."""
    buf = _as_bytes(b)
    info = _lib.StreamInfo()
    check(lib().zb_stream_info_get(_ptr(buf), len(buf), ctypes.byref(info)), "zbound.stream_info")
    return _info_dict(info)


def _info_dict(info):
    modes = {v: k for k, v in _lib.MODES.items()}
    preds = {v: k for k, v in _lib.PREDICTORS.items()}
    encs = {v: k for k, v in _lib.ENCODERS.items()}
    return {
        "format_version": info.format_version,
        "dtype": np.dtype("<f4" if info.dtype == _lib.ZB_F32 else "<f8"),
        "shape": tuple(int(info.dims[i]) for i in range(info.rank)),
        "n": int(info.n),
        "decompressed_bytes": int(info.decompressed_bytes),
        "stream_bytes": int(info.stream_bytes),
        "mode": modes.get(info.mode, info.mode),
        "bound": info.bound,
        "abs_bound": info.abs_bound,
        "predictor": preds.get(info.predictor, "none") if not info.raw else "none",
        "encoder": encs.get(info.encoder, "none") if not info.raw else "none",
        "raw": bool(info.raw),
        "escapes": int(info.escapes),
        "exceptions": int(info.exceptions),
    }


def _as_bytes(b):
    if isinstance(b, (bytes, bytearray)):
        return b
    if isinstance(b, memoryview):
        return b.tobytes() if not b.contiguous else b
    arr = np.asarray(b)
    return np.ascontiguousarray(arr).view(np.uint8).reshape(-1)


def _ptr(buf):
    if isinstance(buf, np.ndarray):
        return buf.ctypes.data
    if isinstance(buf, bytes):
        return ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value
    # bytearray / writable memoryview
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def decompress(b, shape=None, out=None, backend="auto", stream=None, threads=0):
    """Decompresses a zbound stream. For host bytes (bytes, bytearray, memoryview, numpy uint8) returns a numpy
    array of the stream's dtype with the stream's (folded) shape, or `shape` if given, or fills `out` (a
    C-contiguous array of the right dtype and size) and returns it; `threads` CPU threads decode it (0:
    ZBOUND_THREADS or all cores; 1 when many calls run at once, one per thread of a pool). For a stream held in
    device memory (CuPy or __cuda_array_interface__) returns a device array (zb_decompress_device)."""
    if is_device_array(b):
        return _decompress_device(b, shape, out, stream)
    buf = _as_bytes(b)
    if isinstance(buf, memoryview) and buf.readonly:
        buf = buf.tobytes()
    info = _lib.StreamInfo()
    L = lib()
    check(L.zb_stream_info_get(_ptr(buf), len(buf), ctypes.byref(info)), "zbound.decompress")
    dtype = np.dtype(np.float32 if info.dtype == _lib.ZB_F32 else np.float64)
    folded = tuple(int(info.dims[i]) for i in range(info.rank))
    target = _target_shape(shape, folded, int(info.n))
    if out is None:
        out = np.empty(target, dtype=dtype)
    else:
        if not isinstance(out, np.ndarray) or not out.flags.c_contiguous or out.dtype != dtype \
                or out.size != info.n:
            raise ValueError(f"zbound.decompress: out must be a C-contiguous {dtype} array of {info.n} values")
    st = L.zb_decompress_threads(_ptr(buf), len(buf), out.ctypes.data, out.nbytes, _lib.BACKENDS[backend],
                                 int(threads), None)
    check(st, "zbound.decompress")
    return out


def _target_shape(shape, folded, n):
    if shape is None:
        return folded
    shape = tuple(int(s) for s in np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    if int(np.prod(shape, dtype=np.int64)) != n:
        raise ValueError(f"zbound.decompress: shape {shape} does not hold the stream's {n} values")
    return shape


def gpu_available():
    """True when this build has the CUDA backend and a GPU can be used now."""
    return bool(lib().zb_gpu_available())


# ---------------------------------------------------------------- device arrays

def _cai(a):
    cai = a.__cuda_array_interface__
    ptr = int(cai["data"][0])
    shape = tuple(int(s) for s in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        expect, s = [], dtype.itemsize
        for d in reversed(shape):
            expect.insert(0, s)
            s *= d
        if tuple(strides) != tuple(expect) and int(np.prod(shape)) > 1:
            raise ValueError("zbound: device arrays must be C-contiguous")
    return ptr, shape, dtype


def _stream_ptr(stream):
    if stream is not None:
        return int(getattr(stream, "ptr", stream))
    try:
        import cupy
        return int(cupy.cuda.get_current_stream().ptr)
    except ImportError:
        return 0


def _cupy(what):
    try:
        import cupy
    except ImportError as e:
        raise ZboundError(f"zbound.{what}: device arrays need CuPy to allocate the result "
                          f"(pip install cupy-cuda12x), or pass out=") from e
    return cupy


def _compress_device(a, mode, bound, predictor, encoder, fill, threads, stream):
    ptr, shape, dtype = _cai(a)
    code = _dtype_code(dtype)
    if dtype.byteorder == ">":
        raise TypeError("zbound: big-endian device arrays are not supported")
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        raise ValueError("zbound: cannot compress an empty array")
    p = _lib.make_params(mode, bound, predictor, encoder, "gpu", fill, dtype, threads)
    L = lib()
    cap = L.zb_compress_bound(code, n)
    if not L.zb_gpu_available():
        # Ask the library anyway, for its status and message, before any device buffer is allocated: without a
        # usable GPU it returns before touching a pointer (the source pointer stands in for the destination).
        st = L.zb_compress_device(ctypes.byref(p), code, ptr, len(shape), _dims(shape), ptr, cap,
                                  ctypes.byref(ctypes.c_size_t(0)), None, None)
        check(st if st != 0 else 8, "zbound.compress (device array)")
    cp = _cupy("compress")
    dst = cp.empty(cap, dtype=cp.uint8)
    out_len = ctypes.c_size_t(0)
    st = L.zb_compress_device(ctypes.byref(p), code, ptr, len(shape), _dims(shape), int(dst.data.ptr), cap,
                              ctypes.byref(out_len), _stream_ptr(stream), None)
    check(st, "zbound.compress (device array)")
    return dst[: out_len.value].copy()


def _decompress_device(b, shape, out, stream):
    ptr, bshape, bdtype = _cai(b)
    nbytes = int(np.prod(bshape, dtype=np.int64)) * bdtype.itemsize
    L = lib()
    if not L.zb_gpu_available():
        st = L.zb_decompress_device(ptr, nbytes, ptr, nbytes, None, None)  # returns before touching a pointer
        check(st if st != 0 else 8, "zbound.decompress (device stream)")
    cp = _cupy("decompress")
    src = cp.asarray(b).view(cp.uint8).reshape(-1)
    head = cp.asnumpy(src[:HEADER_FIXED_BYTES]).tobytes()
    if len(head) < HEADER_FIXED_BYTES:
        raise _lib.CorruptStreamError("zbound.decompress (device stream): shorter than a header", 5)
    hsize = struct.unpack_from("<H", head, 6)[0]
    # zb_stream_info_get reads the header only but checks that the whole stream is there (src_len): the header
    # copied into a zeroed host buffer of the stream's length (calloc'd pages: nothing is copied but the header).
    header = np.zeros(nbytes, dtype=np.uint8)
    hlen = min(max(hsize, HEADER_FIXED_BYTES), nbytes)
    header[:hlen] = cp.asnumpy(src[:hlen])
    info = _lib.StreamInfo()
    check(L.zb_stream_info_get(header.ctypes.data, nbytes, ctypes.byref(info)), "zbound.decompress (device stream)")
    dtype = np.dtype(np.float32 if info.dtype == _lib.ZB_F32 else np.float64)
    folded = tuple(int(info.dims[i]) for i in range(info.rank))
    target = _target_shape(shape, folded, int(info.n))
    if out is None:
        out = cp.empty(target, dtype=dtype)
    optr, oshape, odtype = _cai(out)
    if odtype != dtype or int(np.prod(oshape, dtype=np.int64)) != info.n:
        raise ValueError(f"zbound.decompress: out must be a C-contiguous {dtype} device array of {info.n} values")
    st = L.zb_decompress_device(int(src.data.ptr), nbytes, optr, int(info.n) * dtype.itemsize, _stream_ptr(stream),
                                None)
    check(st, "zbound.decompress (device stream)")
    return out


def _compress_device_batch(sources, shape, dtype, destinations, capacity, params, stream=None):
    """Compresses the device arrays at the addresses `sources` (C-contiguous, all of `shape` and `dtype`) into the
    device buffers at `destinations` (`capacity` bytes each) with one zb_compress_device_batch call, several chunks
    at a time on the library's CUDA streams; returns the stream lengths. `params`: a _lib.Params."""
    count = len(sources)
    L = lib()
    lens = (ctypes.c_size_t * count)()
    statuses = (ctypes.c_int * count)()
    st = L.zb_compress_device_batch(ctypes.byref(params), _dtype_code(dtype), len(shape), _dims(shape), count,
                                    (ctypes.c_void_p * count)(*sources), (ctypes.c_void_p * count)(*destinations),
                                    capacity, lens, statuses, _stream_ptr(stream), None)
    check(st, "zbound.write_chunks (device batch)")
    return [int(n) for n in lens]


def _decompress_device_batch(sources, lengths, destinations, capacity, stream=None):
    """Decompresses the device streams at the addresses `sources` (`lengths` bytes) into the device buffers at
    `destinations` (`capacity` bytes each) with one zb_decompress_device_batch call."""
    count = len(sources)
    st = lib().zb_decompress_device_batch(count, (ctypes.c_void_p * count)(*sources),
                                          (ctypes.c_size_t * count)(*lengths),
                                          (ctypes.c_void_p * count)(*destinations), capacity, None,
                                          _stream_ptr(stream), None)
    check(st, "zbound.read_chunks (device batch)")
