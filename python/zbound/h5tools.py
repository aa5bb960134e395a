"""Whole HDF5 / netCDF-4 files: `zbound h5 repack` and `zbound h5 verify`.

repack(src, dst, mode, bound) recompresses every float32/float64 dataset with the zbound filter and copies
everything else unchanged: groups (with their creation properties: link and attribute creation order, so netCDF-4
files stay netCDF-4 files), attributes (type, dataspace and value as stored), other datasets (H5Ocopy: storage,
filters and chunks as they were), named datatypes, soft and external links, hard links to one object, dimension
scales (attached again in the new file) and the userblock. A recompressed dataset keeps its datatype, dataspace
(maximum dims too), fill value, fill time, attribute creation order and chunk shape; a contiguous or compact one gets
chunks of about `chunk_mb` MiB; its old filters are replaced by zbound (Fletcher32 is kept after it). Dimension
scales (netCDF coordinate variables) are copied unchanged unless `scales=True`.

Each recompressed chunk is written straight to the file (chunk cache off) and read back from it, and every value
is checked against the bound recorded in that chunk's stream, so the report (ratio, max error / bound, PSNR) is
measured on what the file holds. verify(orig, new) does the same for any pair of files (from h5repack too) and
also checks that everything else is identical.
"""
import fnmatch
import math
import os
import struct

import numpy as np

from ._filter import FILTER_ID, cd_values, parse_cd_values
from ._progress import Progress

SKIP_ATTRS = ("DIMENSION_LIST", "REFERENCE_LIST")  # object references: rebuilt by attaching the scales
FLETCHER32 = 3


class H5ToolError(Exception):
    """A failure that names the object it happened on."""


def _h5py():
    import h5py
    from . import _h5
    if not h5py.h5z.filter_avail(FILTER_ID):
        _h5.register_h5py()
    return h5py


# ---------------------------------------------------------------- value checks

def _uint(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint64 if a.dtype.itemsize == 8 else np.uint32)


class Stats:
    """Error statistics of one dataset: every finite non-fill value against its chunk's bound; NaN, Inf, -0.0
    and the fill value bit for bit."""

    def __init__(self):
        self.values = 0
        self.max_err = 0.0
        self.max_err_over_eb = 0.0
        self.sq_sum = 0.0
        self.count = 0
        self.vmin = math.inf
        self.vmax = -math.inf
        self.violations = 0
        self.special_mismatches = 0
        self.first_violation = None
        self.eb_min = math.inf
        self.eb_max = 0.0
        self.notes = []

    def add(self, orig, new, eb, fill_bits=None, where=""):
        orig = np.asarray(orig)
        new = np.asarray(new)
        self.values += orig.size
        uo, un = _uint(orig), _uint(new)
        exact = ~np.isfinite(orig) | ((orig == 0) & np.signbit(orig))
        if fill_bits is not None:
            exact |= uo == fill_bits
        bad_special = exact & (uo != un)
        ns = int(np.count_nonzero(bad_special))
        if ns:
            self.special_mismatches += ns
            if self.first_violation is None:
                i = np.unravel_index(int(np.flatnonzero(bad_special)[0]), orig.shape)
                self.first_violation = f"{where} index {tuple(int(x) for x in i)}: special value {orig[i]!r} " \
                                       f"came back as {new[i]!r}"
        keep = ~exact
        if not keep.any():
            return
        o = orig[keep].astype(np.float64)
        n = new[keep].astype(np.float64)
        e = np.broadcast_to(np.asarray(eb, dtype=np.float64), orig.shape)[keep]
        err = np.abs(o - n)
        bad = ~(err <= e)  # a NaN reconstruction counts
        nb = int(np.count_nonzero(bad))
        if nb:
            self.violations += nb
            if self.first_violation is None:
                j = int(np.flatnonzero(bad)[0])
                idx = np.unravel_index(int(np.flatnonzero(keep)[j]), orig.shape)
                self.first_violation = (f"{where} index {tuple(int(x) for x in idx)}: |{o[j]!r} - {n[j]!r}| = "
                                        f"{err[j]!r} > bound {e[j]!r}")
        finite_err = err[np.isfinite(err)]
        if finite_err.size:
            self.max_err = max(self.max_err, float(finite_err.max()))
        if nb and not np.isfinite(err).all():
            self.max_err = math.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(e > 0, err / e, np.where(err > 0, np.inf, 0.0))
        if ratio.size:
            self.max_err_over_eb = max(self.max_err_over_eb, float(np.nanmax(ratio)))
        self.sq_sum += float(np.dot(err, err)) if np.isfinite(err).all() else math.inf
        self.count += err.size
        self.vmin = min(self.vmin, float(o.min()))
        self.vmax = max(self.vmax, float(o.max()))
        if e.size:
            self.eb_min = min(self.eb_min, float(e.min()))
            self.eb_max = max(self.eb_max, float(e.max()))

    @property
    def psnr(self):
        if self.count == 0:
            return math.inf
        mse = self.sq_sum / self.count
        rng = self.vmax - self.vmin
        if mse == 0:
            return math.inf
        if rng <= 0:
            return -math.inf
        return 20 * math.log10(rng) - 10 * math.log10(mse)

    @property
    def ok(self):
        return self.violations == 0 and self.special_mismatches == 0


# ---------------------------------------------------------------- chunks and blocks

def _blocks(shape, chunks, itemsize, target=32 << 20):
    """Chunk-aligned blocks (tuples of slices) covering `shape`, each at most ~target bytes (one chunk at least)."""
    nd = len(shape)
    bshape = list(chunks)
    for ax in reversed(range(nd)):
        nbytes = int(np.prod(bshape, dtype=np.int64)) * itemsize
        k = max(1, target // max(nbytes, 1))
        nch = -(-shape[ax] // chunks[ax])
        m = min(k, nch)
        bshape[ax] = chunks[ax] * m
        if m < nch:
            break
    starts = [range(0, shape[ax], bshape[ax]) for ax in range(nd)]
    for origin in np.ndindex(*[len(s) for s in starts]):
        yield tuple(slice(starts[ax][i], min(starts[ax][i] + bshape[ax], shape[ax])) for ax, i in enumerate(origin))


def _chunks_in(sel, chunks):
    """(chunk offset tuple, slices relative to the block) for the chunks that a chunk-aligned block covers."""
    ranges = [range(s.start, s.stop, c) for s, c in zip(sel, chunks)]
    for idx in np.ndindex(*[len(r) for r in ranges]):
        off = tuple(ranges[ax][i] for ax, i in enumerate(idx))
        rel = tuple(slice(o - s.start, min(o + c, s.stop) - s.start) for o, s, c in zip(off, sel, chunks))
        yield off, rel


def auto_chunks(shape, itemsize, chunk_mb=4.0):
    """Chunks for a dataset that has none: whole trailing dims and a slab of the leading ones, ~chunk_mb MiB."""
    target = max(int(chunk_mb * (1 << 20)), itemsize)
    chunks = list(shape)
    for ax in range(len(shape)):
        rest = int(np.prod(chunks[ax + 1:], dtype=np.int64)) * itemsize
        if rest >= target:
            chunks[ax] = 1
            continue
        chunks[ax] = max(1, min(shape[ax], target // rest))
        break
    return tuple(max(1, int(c)) for c in chunks)


class _ZboundInfo:
    """What a dataset's pipeline says about zbound: position, parameters, fill value, and whether the chunk's
    stream header can be read from its stored bytes (only Fletcher32 may follow zbound)."""

    def __init__(self, h5py, ds):
        pl = ds.id.get_create_plist()
        filters = [pl.get_filter(i) for i in range(pl.get_nfilters())]
        ids = [f[0] for f in filters]
        self.index = ids.index(FILTER_ID) if FILTER_ID in ids else None
        self.present = self.index is not None
        self.mode = self.bound = None
        self.header_readable = False
        if self.present:
            self.mode, self.bound, self.predictor, self.encoder = parse_cd_values(filters[self.index][2])
            self.header_readable = all(i == FLETCHER32 for i in ids[self.index + 1:])
        self.has_fill = pl.fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED
        self.fill_bits = None
        if self.has_fill and ds.dtype.kind == "f":
            self.fill_bits = _uint(np.array([ds.fillvalue], dtype=ds.dtype))[0]
        self.chunks = ds.chunks


def _expected_eb(info, orig_chunk, partial):
    """The bound the filter's parameters call for on one chunk (zbound_filter.h): abs as given; rel times the range
    of the chunk's finite, non-fill values, HDF5's zero padding of a partial chunk included when no fill value
    is defined."""
    if info.mode == "abs":
        return info.bound
    if info.mode != "rel":
        return None
    a = np.asarray(orig_chunk)
    ok = np.isfinite(a)
    if info.fill_bits is not None:
        ok &= _uint(a) != info.fill_bits
    vals = a[ok].astype(np.float64)
    lo = float(vals.min()) if vals.size else math.inf
    hi = float(vals.max()) if vals.size else -math.inf
    if partial and info.fill_bits is None:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi < lo:
        return 0.0
    return info.bound * (hi - lo)


def _block_bounds(h5py, new_ds, info, sel, orig_block, stats, where):
    """The bound of every value of a block: from each chunk's stream header (the bound the file promises),
    checked against what the parameters call for; for pw_rel, pw * |x| of each value. A chunk the filter
    skipped (optional filter, failed chunk) or never wrote must be exact."""
    eb = np.zeros(orig_block.shape, dtype=np.float64)
    shape = new_ds.shape
    for off, rel in _chunks_in(sel, info.chunks):
        partial = any(o + c > n for o, c, n in zip(off, info.chunks, shape))
        expected = _expected_eb(info, orig_block[rel], partial)
        try:
            mask, raw = new_ds.id.read_direct_chunk(off)
        except Exception:
            continue  # never written: the fill value everywhere, so the values must be exact
        if mask & (1 << info.index):
            continue  # stored without zbound: must be exact
        if info.mode == "pw_rel":  # point-wise: pw * |x| for each value (the header's eb bounds log2 |x|)
            eb[rel] = info.bound * np.abs(np.asarray(orig_block[rel], dtype=np.float64))
            continue
        if not info.header_readable:
            eb[rel] = expected if expected is not None else 0.0
            continue
        if len(raw) < 32 or raw[:4] != b"ZBND":
            raise H5ToolError(f"{where}: chunk at {off} is not a zbound stream")
        got = struct.unpack_from("<d", raw, 24)[0]
        if expected is not None and not (got == expected or (info.mode == "rel" and
                                                              abs(got - expected) <= 1e-12 * expected)):
            stats.violations += 1
            if stats.first_violation is None:
                stats.first_violation = (f"{where}: chunk at {off} records bound {got!r}, its parameters "
                                         f"({info.mode} {info.bound!r}) call for {expected!r}")
        eb[rel] = got
    return eb


def _check_dataset(h5py, orig_ds, new_ds, stats, progress, where, write_from=None):
    """Every value of new_ds against orig_ds, block by block. With write_from, each block is first read from
    write_from (the source) and written into new_ds, then read back (chunk cache off: from the file)."""
    info = _ZboundInfo(h5py, new_ds)
    if not info.present:
        raise H5ToolError(f"{where}: has no zbound filter")
    itemsize = orig_ds.dtype.itemsize
    for sel in _blocks(new_ds.shape, info.chunks, itemsize):
        block = orig_ds[sel]
        if write_from is not None:
            new_ds[sel] = block
        back = new_ds[sel]
        eb = _block_bounds(h5py, new_ds, info, sel, block, stats, where)
        stats.add(block, back, eb, info.fill_bits, where)
        if progress is not None:
            progress.advance(block.nbytes, where)
    return info


# ---------------------------------------------------------------- copying

def _is_scale(obj):
    try:
        c = obj.attrs.get("CLASS")
    except Exception:
        return False
    return isinstance(c, (bytes, np.bytes_)) and bytes(c).rstrip(b"\0") == b"DIMENSION_SCALE"


def _copy_attrs(h5py, src, dst):
    """Attributes in their order, each with the type and dataspace it is stored with."""
    for name in src.attrs:
        if name in SKIP_ATTRS:
            continue
        bname = name.encode("utf-8")
        aid = h5py.h5a.open(src.id, bname)
        tid = aid.get_type()
        space = aid.get_space()
        if tid.get_class() == h5py.h5t.REFERENCE:
            continue  # an object reference into the source file: meaningless in the new one
        new = h5py.h5a.create(dst.id, bname, tid.copy(), space)
        if space.get_simple_extent_type() != h5py.h5s.NULL:
            buf = np.empty(space.shape if space.get_simple_extent_type() == h5py.h5s.SIMPLE else (),
                           dtype=aid.dtype)
            # Bytes as stored (the file type as memory type), except variable-length data, which h5py converts
            # to Python objects and back (a raw read would leave C pointers in an object array).
            mtype = None if buf.dtype.hasobject else tid
            aid.read(buf, mtype=mtype)
            new.write(buf, mtype=mtype)


def _float_kind(h5py, ds):
    """True for a dataset of IEEE binary32/binary64 values (either byte order) that zbound can take."""
    if ds.dtype.kind != "f" or ds.dtype.itemsize not in (4, 8):
        return False
    tid = ds.id.get_type()
    return (tid.get_class() == h5py.h5t.FLOAT and tid.get_precision() == 8 * tid.get_size()
            and tid.get_offset() == 0)


def _selectable(h5py, ds, path, include, exclude, scales):
    """Whether repack recompresses this dataset, and if not, why (for the report)."""
    if not _float_kind(h5py, ds):
        return False, "not float32/float64"
    if ds.shape is None or len(ds.shape) == 0:
        return False, "scalar or null dataspace"
    if ds.size == 0:
        return False, "empty"
    pl = ds.id.get_create_plist()
    if pl.get_layout() not in (h5py.h5d.CHUNKED, h5py.h5d.CONTIGUOUS, h5py.h5d.COMPACT):
        return False, "virtual dataset"
    if pl.get_external_count() > 0:
        return False, "external storage"
    if include and not any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path.lstrip("/"), p)
                           for p in include):
        return False, "not matched by --include"
    if exclude and any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path.lstrip("/"), p) for p in exclude):
        return False, "matched by --exclude"
    if _is_scale(ds) and not scales:
        return False, "dimension scale (coordinate)"
    return True, ""


def _create_zbound_dataset(h5py, sds, dgrp, name, cd, chunk_mb):
    dcpl = sds.id.get_create_plist().copy()
    if dcpl.get_layout() == h5py.h5d.CHUNKED:
        chunks = sds.chunks
    else:
        chunks = auto_chunks(sds.shape, sds.dtype.itemsize, chunk_mb)
        dcpl.set_layout(h5py.h5d.CHUNKED)
        dcpl.set_chunk(chunks)
    ids = [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]
    if ids:
        dcpl.remove_filter(h5py.h5z.FILTER_ALL)
    dcpl.set_filter(FILTER_ID, h5py.h5z.FLAG_MANDATORY, tuple(cd))
    if FLETCHER32 in ids:
        dcpl.set_fletcher32()
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_INCR)
    tid = sds.id.get_type().copy()
    dsid = h5py.h5d.create(dgrp.id, name.encode("utf-8"), tid, sds.id.get_space(), dcpl=dcpl)
    return h5py.Dataset(dsid)


def _group_cpl(h5py, grp):
    """A new group creation property list with the source group's link and attribute creation order and time
    tracking. (Reusing the source's own list breaks the new file: it carries the source's storage addresses.)"""
    src = grp.id.get_create_plist()
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_link_creation_order(src.get_link_creation_order())
    gcpl.set_attr_creation_order(src.get_attr_creation_order())
    gcpl.set_obj_track_times(src.get_obj_track_times())
    return gcpl


def _open_output(h5py, src_file, dst):
    """The new file with the source's file creation properties (root link order, userblock size ...) and the
    chunk cache off, so that every chunk goes to the file when it is written and comes from it when it is read."""
    fcpl = src_file.id.get_create_plist()
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_fclose_degree(h5py.h5f.CLOSE_STRONG)
    fapl.set_cache(0, 0, 0, 0.0)
    fid = h5py.h5f.create(os.fsencode(dst), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)
    return h5py.File(fid)


def _storage(ds):
    try:
        return int(ds.id.get_storage_size())
    except Exception:
        return 0


def repack(src, dst, mode, bound, include=(), exclude=(), predictor="auto", encoder="auto", chunk_mb=4.0,
           scales=False, progress=None):
    """Recompresses every float dataset of `src` into `dst` (see the module's doc). Returns a report dict:
    {"datasets": [per recompressed dataset], "copied": [per other dataset], "ok": bool}. Raises H5ToolError
    naming the object on failure. `progress`: None (a bar when stderr is a terminal), True, False."""
    h5py = _h5py()
    from ._filter import probe
    probe(mode, bound, predictor, encoder)
    cd = cd_values(mode, bound, predictor, encoder)
    if os.path.abspath(src) == os.path.abspath(dst):
        raise H5ToolError(f"{dst}: the output would overwrite the input")
    rows, copied = [], []
    with h5py.File(src, "r") as fs:
        total = 0
        items = []
        fs.visititems(lambda n, o: items.append(o) if isinstance(o, h5py.Dataset) else None)
        for o in items:
            total += o.size * o.dtype.itemsize if o.shape is not None else 0
        bar = Progress(total, "repack", enabled=progress)
        ub = fs.userblock_size
        try:
            fd = _open_output(h5py, fs, dst)
        except Exception as e:
            raise H5ToolError(f"{dst}: cannot create: {e}") from e
        seen = {}
        with_dims = []
        try:
            _copy_attrs(h5py, fs, fd)
            _walk(h5py, fs, fd, fd, "/", seen, with_dims, rows, copied, cd, mode, bound, include, exclude, scales,
                  chunk_mb, bar)
            _attach_scales(h5py, fs, fd, seen, with_dims)
        finally:
            fd.close()
            bar.close()
    if ub:
        with open(src, "rb") as a, open(dst, "r+b") as b:
            b.write(a.read(ub))
    return {"src": str(src), "dst": str(dst), "mode": mode, "bound": bound, "datasets": rows, "copied": copied,
            "ok": all(r["violations"] == 0 for r in rows)}


def _walk(h5py, sgrp, dgrp, dfile, path, seen, with_dims, rows, copied, cd, mode, bound, include, exclude,
          scales, chunk_mb, bar):
    for name in sgrp:
        p = path.rstrip("/") + "/" + name
        try:
            link = sgrp.get(name, getlink=True)
            if isinstance(link, h5py.SoftLink):
                dgrp[name] = h5py.SoftLink(link.path)
                continue
            if isinstance(link, h5py.ExternalLink):
                dgrp[name] = h5py.ExternalLink(link.filename, link.path)
                continue
            obj = sgrp[name]
            key = (obj.id.fileno, h5py.h5o.get_info(obj.id).addr)
            if key in seen:
                dgrp[name] = dfile[seen[key]]  # another hard link to an object already copied
                continue
            seen[key] = p
            if isinstance(obj, h5py.Group):
                gid = h5py.h5g.create(dgrp.id, name.encode("utf-8"), gcpl=_group_cpl(h5py, obj))
                sub = h5py.Group(gid)
                _copy_attrs(h5py, obj, sub)
                _walk(h5py, obj, sub, dfile, p, seen, with_dims, rows, copied, cd, mode, bound, include, exclude,
                      scales, chunk_mb, bar)
            elif isinstance(obj, h5py.Dataset):
                if "DIMENSION_LIST" in obj.attrs:
                    with_dims.append(p)
                take, why = _selectable(h5py, obj, p, include, exclude, scales)
                if take:
                    rows.append(_recompress(h5py, obj, dgrp, name, p, cd, mode, bound, chunk_mb, bar))
                else:
                    dgrp.copy(obj, name, without_attrs=True)
                    _copy_attrs(h5py, obj, dgrp[name])
                    copied.append({"path": p, "why": why, "dtype": str(obj.dtype),
                                   "shape": list(obj.shape) if obj.shape is not None else None})
                    bar.advance(obj.size * obj.dtype.itemsize if obj.shape is not None else 0, p)
            else:  # named datatype
                dgrp.copy(obj, name)
        except H5ToolError:
            raise
        except Exception as e:
            raise H5ToolError(f"{p}: {e}") from e


def _recompress(h5py, sds, dgrp, name, path, cd, mode, bound, chunk_mb, bar):
    dds = _create_zbound_dataset(h5py, sds, dgrp, name, cd, chunk_mb)
    _copy_attrs(h5py, sds, dds)
    stats = Stats()
    _check_dataset(h5py, sds, dds, stats, bar, path, write_from=sds)
    nbytes = sds.size * sds.dtype.itemsize
    out = _storage(dds)
    return {
        "path": path, "shape": list(sds.shape), "dtype": sds.dtype.str, "chunks": list(dds.chunks),
        "bytes": nbytes, "stored_in": _storage(sds), "stored_out": out, "ratio": nbytes / out if out else math.inf,
        "mode": mode, "bound": bound, "eb_min": stats.eb_min if stats.count else None,
        "eb_max": stats.eb_max if stats.count else None, "max_err": stats.max_err,
        "max_err_over_eb": stats.max_err_over_eb, "psnr": stats.psnr,
        "violations": stats.violations + stats.special_mismatches, "first_violation": stats.first_violation,
    }


def _scale_paths(h5py, ds, seen):
    out = []
    for dim in ds.dims:
        paths = []
        for scale in dim.values():
            key = (scale.id.fileno, h5py.h5o.get_info(scale.id).addr)
            paths.append(seen.get(key, scale.name))
        out.append(paths)
    return out


def _attach_scales(h5py, fs, fd, seen, with_dims):
    for p in with_dims:
        try:
            sds, dds = fs[p], fd[p]
            for i, paths in enumerate(_scale_paths(h5py, sds, seen)):
                for sp in paths:
                    scale = fd[sp]
                    if not h5py.h5ds.is_scale(scale.id):
                        scale.make_scale()
                    dds.dims[i].attach_scale(scale)
        except Exception as e:
            raise H5ToolError(f"{p}: attaching dimension scales: {e}") from e


# ---------------------------------------------------------------- verify

def _attr_values(h5py, obj):
    out = {}
    for name in obj.attrs:
        if name in SKIP_ATTRS:
            continue
        aid = h5py.h5a.open(obj.id, name.encode("utf-8"))
        tid = aid.get_type()
        space = aid.get_space()
        if tid.get_class() == h5py.h5t.REFERENCE:
            continue
        if space.get_simple_extent_type() == h5py.h5s.NULL:
            out[name] = ("null", aid.dtype.str)
            continue
        buf = np.empty(space.shape if space.get_simple_extent_type() == h5py.h5s.SIMPLE else (), dtype=aid.dtype)
        aid.read(buf, mtype=None if buf.dtype.hasobject else tid)
        out[name] = (buf.dtype.str, buf.shape, _canon(buf))
    return out


def _canon(buf):
    if buf.dtype.kind == "O" or buf.dtype.hasobject:
        return repr(buf.tolist())
    return np.ascontiguousarray(buf).tobytes()


def _compare_exact(orig, new, progress, where):
    """Values of two datasets equal byte for byte (block by block). Returns a message or None."""
    if orig.shape is None or len(orig.shape) == 0:
        a, b = orig[()], new[()]
        same = _canon(np.asarray(a)) == _canon(np.asarray(b))
        return None if same else f"{where}: values differ"
    chunks = orig.chunks or auto_chunks(orig.shape, max(orig.dtype.itemsize, 1), 4.0)
    for sel in _blocks(orig.shape, chunks, max(orig.dtype.itemsize, 1)):
        a, b = orig[sel], new[sel]
        if _canon(a) != _canon(b):
            return f"{where}: values differ in block {tuple((s.start, s.stop) for s in sel)}"
        if progress is not None:
            progress.advance(a.nbytes, where)
    return None


def verify(orig, new, progress=None):
    """Checks `new` against `orig`: every value of a dataset that carries the zbound filter in `new` within the
    bound of its chunk (NaN, Inf, -0.0 and the fill value bit for bit), every other dataset, every attribute,
    group, link and dimension scale identical. Returns {"datasets": [...], "problems": [...], "ok": bool}."""
    h5py = _h5py()
    rows, problems = [], []
    with h5py.File(orig, "r") as fa, h5py.File(new, "r", rdcc_nbytes=0) as fb:
        items = []
        fa.visititems(lambda n, o: items.append(o) if isinstance(o, h5py.Dataset) else None)
        total = sum(o.size * o.dtype.itemsize for o in items if o.shape is not None)
        bar = Progress(total, "verify", enabled=progress)
        seen_a, seen_b = {}, {}
        try:
            if _attr_values(h5py, fa) != _attr_values(h5py, fb):
                problems.append("/: root attributes differ")
            _verify_group(h5py, fa, fb, "/", rows, problems, bar, seen_a, seen_b)
        finally:
            bar.close()
    return {"orig": str(orig), "new": str(new), "datasets": rows, "problems": problems,
            "ok": not problems and all(r["violations"] == 0 for r in rows)}


def _verify_group(h5py, ga, gb, path, rows, problems, bar, seen_a, seen_b):
    names_a, names_b = list(ga), list(gb)
    for extra in sorted(set(names_b) - set(names_a)):
        problems.append(f"{path.rstrip('/')}/{extra}: in the new file only")
    for name in names_a:
        p = path.rstrip("/") + "/" + name
        if name not in names_b:
            problems.append(f"{p}: missing from the new file")
            continue
        try:
            la, lb = ga.get(name, getlink=True), gb.get(name, getlink=True)
            if type(la) is not type(lb):
                problems.append(f"{p}: link kind differs ({type(la).__name__} vs {type(lb).__name__})")
                continue
            if isinstance(la, h5py.SoftLink):
                if la.path != lb.path:
                    problems.append(f"{p}: soft link target differs")
                continue
            if isinstance(la, h5py.ExternalLink):
                if (la.filename, la.path) != (lb.filename, lb.path):
                    problems.append(f"{p}: external link differs")
                continue
            oa, ob = ga[name], gb[name]
            ka = (oa.id.fileno, h5py.h5o.get_info(oa.id).addr)
            kb = (ob.id.fileno, h5py.h5o.get_info(ob.id).addr)
            if ka in seen_a or kb in seen_b:
                if seen_a.get(ka) != seen_b.get(kb):
                    problems.append(f"{p}: hard links differ")
                continue
            seen_a[ka], seen_b[kb] = p, p
            if type(oa) is not type(ob):
                problems.append(f"{p}: {type(oa).__name__} in the original, {type(ob).__name__} in the new file")
                continue
            if _attr_values(h5py, oa) != _attr_values(h5py, ob):
                problems.append(f"{p}: attributes differ")
            if isinstance(oa, h5py.Group):
                _verify_group(h5py, oa, ob, p, rows, problems, bar, seen_a, seen_b)
            elif isinstance(oa, h5py.Dataset):
                _verify_dataset(h5py, oa, ob, p, rows, problems, bar)
            elif isinstance(oa, h5py.Datatype) and oa.dtype != ob.dtype:
                problems.append(f"{p}: named datatype differs")
        except H5ToolError as e:
            problems.append(str(e))
        except Exception as e:
            problems.append(f"{p}: {type(e).__name__}: {e}")


def _verify_dataset(h5py, a, b, p, rows, problems, bar):
    if a.dtype != b.dtype or a.shape != b.shape or a.maxshape != b.maxshape:
        problems.append(f"{p}: dtype/shape differ ({a.dtype} {a.shape} vs {b.dtype} {b.shape})")
        return
    sa = [[s.name for s in d.values()] for d in a.dims] if "DIMENSION_LIST" in a.attrs else None
    sb = [[s.name for s in d.values()] for d in b.dims] if "DIMENSION_LIST" in b.attrs else None
    if sa != sb:
        problems.append(f"{p}: dimension scales differ ({sa} vs {sb})")
    if h5py.h5ds.is_scale(a.id) != h5py.h5ds.is_scale(b.id):
        problems.append(f"{p}: dimension scale in one file only")
    info = _ZboundInfo(h5py, b)
    if not info.present or not _float_kind(h5py, b):
        msg = _compare_exact(a, b, bar, p)
        if msg:
            problems.append(msg)
        return
    stats = Stats()
    _check_dataset(h5py, a, b, stats, bar, p)
    nbytes = a.size * a.dtype.itemsize
    out = _storage(b)
    rows.append({
        "path": p, "shape": list(a.shape), "dtype": a.dtype.str, "chunks": list(b.chunks), "bytes": nbytes,
        "stored_in": _storage(a), "stored_out": out, "ratio": nbytes / out if out else math.inf, "mode": info.mode,
        "bound": info.bound, "eb_min": stats.eb_min if stats.count else None,
        "eb_max": stats.eb_max if stats.count else None, "max_err": stats.max_err,
        "max_err_over_eb": stats.max_err_over_eb, "psnr": stats.psnr,
        "violations": stats.violations + stats.special_mismatches, "first_violation": stats.first_violation,
    })


# ---------------------------------------------------------------- text report

def format_rows(rows, title):
    lines = [title,
             f"{'dataset':<40} {'dtype':>5} {'shape':>18} {'ratio':>8} {'err/eb':>7} {'PSNR dB':>8} {'violations':>10}"]
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        psnr = r["psnr"]
        ps = "inf" if psnr == math.inf else f"{psnr:.1f}"
        lines.append(f"{r['path'][-40:]:<40} {r['dtype'][1:]:>5} {shape:>18} {r['ratio']:8.2f} "
                     f"{r['max_err_over_eb']:7.3f} {ps:>8} {r['violations']:>10}")
    if rows:
        tb = sum(r["bytes"] for r in rows)
        to = sum(r["stored_out"] for r in rows)
        lines.append(f"{len(rows)} datasets, {tb / 1e6:.1f} MB -> {to / 1e6:.2f} MB stored "
                     f"(ratio {tb / to if to else math.inf:.2f}), worst err/eb "
                     f"{max(r['max_err_over_eb'] for r in rows):.3f}, "
                     f"violations {sum(r['violations'] for r in rows)}")
    return "\n".join(lines)
