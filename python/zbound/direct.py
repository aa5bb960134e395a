"""Chunk I/O around HDF5's filter pipeline: compress the chunks of an array yourself, in parallel (CPU threads) or on
the GPU (a CuPy / ``__cuda_array_interface__`` array), and store them with ``H5Dwrite_chunk``; read them back with
``H5Dread_chunk`` and decompress them the same way. The chunks are the exact streams the zbound filter writes for
the same data (same parameters, same fill value, same bytes), so the file reads back through the plugin anywhere:

    with h5py.File("out.h5", "w") as f:
        ds = f.create_dataset("T", shape=a.shape, dtype=a.dtype, chunks=(16, 64, 128), **zbound.Filter(abs=1e-2))
        zbound.write_chunks(ds, a)              # numpy: all cores; CuPy: compressed on the GPU
        b = zbound.read_chunks(ds)              # numpy; read_chunks(ds, device=True) gives a CuPy array

HDF5 runs its filter on one chunk at a time in the calling thread; write_chunks compresses the chunks of one call
concurrently (``threads``, default: all cores, one thread per chunk), which is where the speed comes from on the CPU.
"""
import os
from concurrent.futures import ThreadPoolExecutor
from itertools import product

import numpy as np

from ._api import compress, decompress, is_device_array
from ._filter import FILTER_ID, parse_cd_values

__all__ = ["write_chunks", "read_chunks"]


class _Layout:
    """What the dataset's creation properties say about its chunks and its zbound filter."""

    def __init__(self, dset):
        import h5py

        if dset.chunks is None:
            raise ValueError(f"zbound: dataset {dset.name} is not chunked")
        dtype = np.dtype(dset.dtype)
        if dtype.kind != "f" or dtype.itemsize not in (4, 8) or dtype.byteorder == ">":
            raise TypeError(f"zbound: dataset {dset.name} has type {dtype}; chunk I/O takes native float32/float64")
        plist = dset.id.get_create_plist()
        filters = [plist.get_filter(i) for i in range(plist.get_nfilters())]
        if len(filters) != 1 or filters[0][0] != FILTER_ID:
            names = [f[3].decode(errors="replace") if isinstance(f[3], bytes) else str(f[3]) for f in filters]
            raise ValueError(f"zbound: dataset {dset.name} must have the zbound filter as its only filter "
                             f"(it has {names or 'none'})")
        self.mode, self.bound, self.predictor, self.encoder = parse_cd_values(filters[0][2])
        user_fill = plist.fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED
        # The filter keeps the user's fill value bit for bit (DESIGN invariant 2): the same parameter here.
        self.fill = dtype.type(dset.fillvalue) if user_fill else None
        # HDF5 pads the part of an edge chunk outside the dataset with the fill value (0 when none is defined).
        self.pad = self.fill if user_fill else dtype.type(0)
        self.dtype, self.shape, self.chunks = dtype, tuple(dset.shape), tuple(dset.chunks)

    def offsets(self):
        grid = [range(0, n, c) for n, c in zip(self.shape, self.chunks)]
        return product(*grid)

    def region(self, offset):
        """The dataset's slices of the chunk at `offset` and the same region inside the chunk."""
        stop = [min(o + c, n) for o, c, n in zip(offset, self.chunks, self.shape)]
        return (tuple(slice(o, s) for o, s in zip(offset, stop)),
                tuple(slice(0, s - o) for o, s in zip(offset, stop)))


def _threads(threads):
    return max(1, int(threads) if threads else (os.cpu_count() or 1))


def write_chunks(dset, data, threads=None, backend="auto"):
    """Compresses every chunk of `data` (a numpy array, or a CuPy / ``__cuda_array_interface__`` array, of the
    dataset's shape) with the dataset's zbound parameters and writes it with ``H5Dwrite_chunk``. Host arrays are
    compressed by `threads` concurrent calls (default: all cores), device arrays on the GPU. Every chunk is
    written, so every earlier value of the dataset is replaced."""
    lay = _Layout(dset)
    device = is_device_array(data)
    if tuple(data.shape) != lay.shape:
        raise ValueError(f"zbound: data has shape {tuple(data.shape)}, dataset {dset.name} has {lay.shape}")
    if np.dtype(data.dtype) != lay.dtype:
        raise TypeError(f"zbound: data is {np.dtype(data.dtype)}, dataset {dset.name} is {lay.dtype}")
    kw = {lay.mode: lay.bound, "predictor": lay.predictor, "encoder": lay.encoder, "fill": lay.fill}
    if device:
        import cupy as cp
        xp = cp
    else:
        xp = np
        data = np.asarray(data)

    def chunk_of(offset):
        outer, inner = lay.region(offset)
        part = data[outer]
        if part.shape == lay.chunks:
            return xp.ascontiguousarray(part)
        padded = xp.full(lay.chunks, lay.pad, dtype=lay.dtype)
        padded[inner] = part
        return padded

    def compressed(offset):
        c = chunk_of(offset)
        if device:
            return xp.asnumpy(compress(c, **kw)).tobytes()
        return compress(c, backend=backend, threads=1, **kw)

    offsets = list(lay.offsets())
    if device:
        for off in offsets:
            dset.id.write_direct_chunk(off, compressed(off))
        return
    # A bounded window of chunks in flight, so that memory stays a few chunks per thread.
    n = _threads(threads)
    with ThreadPoolExecutor(max_workers=n) as pool:
        for i in range(0, len(offsets), 4 * n):
            window = offsets[i:i + 4 * n]
            for off, stream in zip(window, pool.map(compressed, window)):
                dset.id.write_direct_chunk(off, stream)


def read_chunks(dset, out=None, backend="auto", device=False):
    """Reads every stored chunk with ``H5Dread_chunk`` and decompresses it into `out` (default: a new numpy array,
    or with device=True a CuPy array, decompressed on the GPU). Chunks never written read as the fill value;
    chunks HDF5 stored unfiltered (an optional filter declined them) are copied as they are. Chunks are decoded
    one after the other: each decompression already uses every core (ZBOUND_THREADS)."""
    lay = _Layout(dset)
    if out is None:
        if device:
            import cupy as cp
            out = cp.empty(lay.shape, dtype=lay.dtype)
        else:
            out = np.empty(lay.shape, dtype=lay.dtype)
    elif tuple(out.shape) != lay.shape or np.dtype(out.dtype) != lay.dtype:
        raise ValueError(f"zbound: out must be a {lay.dtype} array of shape {lay.shape}")
    device = is_device_array(out)
    stored = {}
    for i in range(dset.id.get_num_chunks()):
        info = dset.id.get_chunk_info(i)
        stored[tuple(info.chunk_offset)] = info
    if len(stored) < int(np.prod([-(-n // c) for n, c in zip(lay.shape, lay.chunks)])):
        out[...] = dset.fillvalue

    def decoded(offset):
        mask, raw = dset.id.read_direct_chunk(offset)
        if mask & 1:   # the zbound filter (the only one) was skipped for this chunk: raw values
            return np.frombuffer(raw, dtype=lay.dtype).reshape(lay.chunks)
        if device:
            import cupy as cp
            return decompress(cp.asarray(np.frombuffer(raw, dtype=np.uint8)), shape=lay.chunks)
        return decompress(raw, shape=lay.chunks, backend=backend)

    def place(offset, chunk):
        outer, inner = lay.region(offset)
        if device and isinstance(chunk, np.ndarray):
            import cupy as cp
            chunk = cp.asarray(chunk)
        out[outer] = chunk[inner]

    for off in sorted(stored):
        place(off, decoded(off))
    return out
