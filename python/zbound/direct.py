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

    def params(self):
        """zbound.compress keywords of the dataset's filter."""
        return {self.mode: self.bound, "predictor": self.predictor, "encoder": self.encoder, "fill": self.fill}

    def chunk_bytes(self):
        return int(np.prod(self.chunks)) * self.dtype.itemsize

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
    compressed by `threads` concurrent calls (default: all cores); device arrays on the GPU in batches of chunks
    (zb_compress_device_batch) while the previous batch is written to the file. Every chunk is written, so every
    earlier value of the dataset is replaced."""
    lay = _Layout(dset)
    device = is_device_array(data)
    if tuple(data.shape) != lay.shape:
        raise ValueError(f"zbound: data has shape {tuple(data.shape)}, dataset {dset.name} has {lay.shape}")
    if np.dtype(data.dtype) != lay.dtype:
        raise TypeError(f"zbound: data is {np.dtype(data.dtype)}, dataset {dset.name} is {lay.dtype}")
    kw = lay.params()
    if device:
        import cupy
        data = cupy.asarray(data)   # any __cuda_array_interface__ array, without a copy
    else:
        data = np.asarray(data)

    def chunk_of(offset):
        outer, inner = lay.region(offset)
        part = data[outer]
        if part.shape == lay.chunks:
            return np.ascontiguousarray(part)
        padded = np.full(lay.chunks, lay.pad, dtype=lay.dtype)
        padded[inner] = part
        return padded

    def compressed(offset):
        return compress(chunk_of(offset), backend=backend, threads=1, **kw)

    offsets = list(lay.offsets())
    if device:
        _write_device_chunks(dset, lay, data, offsets)
        return
    # A bounded window of chunks in flight, so that memory stays a few chunks per thread.
    n = _threads(threads)
    with ThreadPoolExecutor(max_workers=n) as pool:
        for i in range(0, len(offsets), 4 * n):
            window = offsets[i:i + 4 * n]
            for off, stream in zip(window, pool.map(compressed, window)):
                dset.id.write_direct_chunk(off, stream)


def read_chunks(dset, out=None, backend="auto", device=False, threads=None):
    """Reads every stored chunk with ``H5Dread_chunk`` and decompresses it into `out` (default: a new numpy array,
    or with device=True a CuPy array, decompressed on the GPU). Chunks never written read as the fill value;
    chunks HDF5 stored unfiltered (an optional filter declined them) are copied as they are. On the host, chunks
    are decoded by `threads` concurrent calls (default: all cores), each on one thread, or on several when there
    are fewer chunks than threads; on the GPU, in batches (zb_decompress_device_batch) while the next batch is
    read from the file (for a file open read-only through HDF5's default driver, by ``os.preadv`` at the chunks'
    addresses on several threads; ZBOUND_CHUNK_PREAD=0 keeps ``H5Dread_chunk``)."""
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
    target = out
    if device:
        import cupy as cp
        target = cp.asarray(out)   # a CuPy view of any __cuda_array_interface__ array
    stored = {}
    for i in range(dset.id.get_num_chunks()):
        info = dset.id.get_chunk_info(i)
        stored[tuple(info.chunk_offset)] = info
    if len(stored) < int(np.prod([-(-n // c) for n, c in zip(lay.shape, lay.chunks)])):
        target[...] = dset.fillvalue

    if device:
        _read_device_chunks(dset, lay, target, [stored[off] for off in sorted(stored)])
        return out

    offsets = sorted(stored)
    n = _threads(threads)
    # One thread per call while there are chunks for every thread: one call on all cores after another spent a
    # team start and a join per chunk, and left the cores idle while HDF5 read the next chunk.
    per_call = max(1, n // max(1, len(offsets)))

    def decoded(offset):
        mask, raw = dset.id.read_direct_chunk(offset)
        if mask & 1:   # the zbound filter (the only one) was skipped for this chunk: raw values
            return np.frombuffer(raw, dtype=lay.dtype).reshape(lay.chunks)
        return decompress(raw, shape=lay.chunks, backend=backend, threads=per_call)

    def place(offset):
        outer, inner = lay.region(offset)
        out[outer] = decoded(offset)[inner]

    with ThreadPoolExecutor(max_workers=max(1, min(n, len(offsets)))) as pool:
        for _ in pool.map(place, offsets):   # re-raises the first chunk's error
            pass
    return out


# ---------------------------------------------------------------- device arrays
# Chunks go through the GPU in windows of a few hundred MB: the window's chunks are compressed (or decompressed)
# with one batched call, several at a time on the library's CUDA streams, in a helper thread while the calling
# thread moves the previous window's streams between HDF5 and pinned host memory.

_WINDOW_BYTES = 256 << 20


def _window(lay, count):
    return max(1, min(count, _WINDOW_BYTES // max(1, lay.chunk_bytes())))


def _full_contiguous(view, lay):
    """True when `view` (a region of the user's device array) is a whole chunk laid out as the chunk itself, so
    the library can read or write it in place."""
    return view.shape == lay.chunks and view.flags.c_contiguous


class _Staging:
    """Per-slot device buffers for chunks that are not laid out as a whole chunk in the user's array (edge chunks,
    chunks of arrays chunked along more than the slowest dimension), allocated on first need."""

    def __init__(self, lay, per):
        self.lay, self.per, self.buf = lay, per, None

    def slot(self, j):
        if self.buf is None:
            import cupy as cp
            self.buf = cp.empty((self.per,) + self.lay.chunks, dtype=self.lay.dtype)
        return self.buf[j]


def _write_device_chunks(dset, lay, data, offsets):
    import cupy as cp
    import cupyx

    from . import _lib
    from ._api import _compress_device_batch

    params = _lib.make_params(lay.mode, lay.bound, lay.predictor, lay.encoder, "gpu", lay.fill, lay.dtype)
    cap = int(_lib.lib().zb_compress_bound(_lib.ZB_F64 if lay.dtype.itemsize == 8 else _lib.ZB_F32,
                                           int(np.prod(lay.chunks))))
    per = _window(lay, len(offsets))
    # Two sets of buffers: the GPU fills one while the calling thread writes the other's streams to the file.
    staging = [_Staging(lay, per) for _ in range(2)]
    streams = [cp.empty(per * cap, dtype=cp.uint8) for _ in range(2)]
    host = [None, None]   # pinned, grown to the window's compressed size
    d2h = cp.cuda.runtime.memcpyDeviceToHost

    def compress_window(k, b):
        window = offsets[k * per:(k + 1) * per]
        sources = []
        for j, off in enumerate(window):
            outer, inner = lay.region(off)
            part = data[outer]
            if _full_contiguous(part, lay):
                sources.append(int(part.data.ptr))
                continue
            slot = staging[b].slot(j)
            if part.shape != lay.chunks:
                slot.fill(lay.pad)   # HDF5 pads the part of an edge chunk outside the dataset
            slot[inner] = part
            sources.append(int(slot.data.ptr))
        base = int(streams[b].data.ptr)
        lens = _compress_device_batch(sources, lay.chunks, lay.dtype, [base + j * cap for j in range(len(window))],
                                      cap, params)
        total = sum(lens)
        if host[b] is None or host[b].size < total:
            host[b] = cupyx.empty_pinned(max(total, 1 << 20), dtype=np.uint8)
        starts, pos = [], 0
        for j, n in enumerate(lens):
            cp.cuda.runtime.memcpy(host[b].ctypes.data + pos, base + j * cap, n, d2h)
            starts.append(pos)
            pos += n
        return window, lens, starts

    cp.cuda.Device().synchronize()   # the caller's work on `data`, on any stream, is done
    nwin = -(-len(offsets) // per)
    with ThreadPoolExecutor(max_workers=1) as gpu:
        pending = gpu.submit(compress_window, 0, 0)
        for k in range(nwin):
            window, lens, starts = pending.result()
            if k + 1 < nwin:
                pending = gpu.submit(compress_window, k + 1, (k + 1) % 2)
            buf = host[k % 2]
            for off, n, pos in zip(window, lens, starts):
                dset.id.write_direct_chunk(off, buf[pos:pos + n])


class _ChunkReader:
    """Stored chunk bytes into a buffer: with ``H5Dread_chunk``, or, for a file open read-only through HDF5's default
    POSIX driver, with ``os.preadv`` at the chunks' file addresses on several threads (HDF5 serializes its calls: a
    4 GB array's 465 MB of stored bytes took about 65 ms through read_direct_chunk on the device machine, most of a
    device read_chunks). The first chunk is read both ways; where they differ, HDF5 reads everything.
    ZBOUND_CHUNK_PREAD=0 forces HDF5."""

    _PIECE = 1 << 20   # what the threads take in turn: a window may hold only a few chunks

    def __init__(self, dset, threads=8):
        self.dset, self.threads, self.fd, self.checked = dset, threads, None, False
        f = dset.file
        if os.environ.get("ZBOUND_CHUNK_PREAD") != "0" and f.mode == "r" and f.driver == "sec2":
            import h5py
            try:
                # Chunk addresses are relative to the end of the user block before HDF5 1.14.4, absolute from it on
                # (HDFGroup/hdf5 pull request 4236).
                absolute = h5py.version.hdf5_version_tuple >= (1, 14, 4)
                self.fd, self.base = int(f.id.get_vfd_handle()), 0 if absolute else int(f.userblock_size)
            except Exception:
                self.fd = None

    def _hdf5(self, info, view):
        self.dset.id.read_direct_chunk(tuple(info.chunk_offset), out=view)   # the mask is the chunk info's

    def _pread(self, at, view):
        while len(view):
            got = os.preadv(self.fd, [view], at)
            if got <= 0:
                raise OSError(f"zbound: reading the stored chunks from {self.dset.file.filename} failed "
                              f"(short read at byte {at})")
            view, at = view[got:], at + got

    def read(self, infos, places, buf):
        """Reads the chunks `infos` (h5py StoreInfo) to buf[places[i]:]; returns their filter masks."""
        masks = [int(info.filter_mask) for info in infos]
        first = 0
        if self.fd is not None and not self.checked and infos:
            size, pos = int(infos[0].size), places[0]
            self._hdf5(infos[0], buf[pos:pos + size])
            direct = np.empty(size, np.uint8)
            self._pread(self.base + int(infos[0].byte_offset), memoryview(direct))
            if not np.array_equal(direct, buf[pos:pos + size]):
                self.fd = None
            self.checked, first = True, 1
        if self.fd is None:
            for info, pos in zip(infos[first:], places[first:]):
                self._hdf5(info, buf[pos:pos + int(info.size)])
            return masks
        mv = memoryview(buf)
        pieces = [(self.base + int(info.byte_offset) + p, pos + p, min(self._PIECE, int(info.size) - p))
                  for info, pos in zip(infos[first:], places[first:]) for p in range(0, int(info.size), self._PIECE)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.threads, len(pieces)))) as pool:
            for _ in pool.map(lambda q: self._pread(q[0], mv[q[1]:q[1] + q[2]]), pieces):
                pass
        return masks


def _read_device_chunks(dset, lay, out, infos):
    import cupy as cp
    import cupyx

    from ._api import _decompress_device_batch

    per = _window(lay, len(infos))
    chunk_bytes = lay.chunk_bytes()
    windows = [infos[i:i + per] for i in range(0, len(infos), per)]

    def aligned(n):   # streams start on 256-byte boundaries: raw (unfiltered) chunks are read as values in place
        return (n + 255) & ~255

    room = max([sum(aligned(int(info.size)) for info in w) for w in windows] + [1])
    staging = [_Staging(lay, per) for _ in range(2)]
    device_in = [cp.empty(room, dtype=cp.uint8) for _ in range(2)]
    host = [cupyx.empty_pinned(room, dtype=np.uint8) for _ in range(2)]

    reader = _ChunkReader(dset)

    def read_window(k, b):
        """Reads the stored streams of window k into host[b] (in the calling thread, which owns HDF5)."""
        places, pos = [], 0
        for info in windows[k]:
            places.append(pos)
            pos += aligned(int(info.size))
        masks = reader.read(windows[k], places, host[b])
        items = [(tuple(info.chunk_offset), p, int(info.size), m) for info, p, m in zip(windows[k], places, masks)]
        return items, pos

    def decode_window(items, used, b):
        base = int(device_in[b].data.ptr)
        cp.cuda.runtime.memcpy(base, host[b].ctypes.data, used, cp.cuda.runtime.memcpyHostToDevice)
        batch, placements = [], []
        for j, (off, pos, size, mask) in enumerate(items):
            outer, inner = lay.region(off)
            region = out[outer]
            if mask & 1:   # stored unfiltered (the filter declined this chunk): the raw values
                if size != chunk_bytes:
                    raise ValueError(f"zbound: unfiltered chunk at {off} holds {size} bytes, not {chunk_bytes}")
                region[...] = device_in[b][pos:pos + size].view(lay.dtype).reshape(lay.chunks)[inner]
                continue
            if _full_contiguous(region, lay):
                target = int(region.data.ptr)
            else:
                slot = staging[b].slot(j)
                target = int(slot.data.ptr)
                placements.append((region, slot, inner))
            batch.append((base + pos, size, target))
        if batch:
            src, lens, dst = zip(*batch)
            _decompress_device_batch(list(src), list(lens), list(dst), chunk_bytes)
        for region, chunk, inner in placements:
            region[...] = chunk[inner]

    cp.cuda.Device().synchronize()   # the caller's earlier work on `out` is done
    with ThreadPoolExecutor(max_workers=1) as gpu:
        pending = None
        for k in range(len(windows)):
            items, used = read_window(k, k % 2)
            if pending is not None:
                pending.result()
            pending = gpu.submit(decode_window, items, used, k % 2)
        if pending is not None:
            pending.result()
    cp.cuda.Device().synchronize()
