"""Every float field of every file in ../shared/data, written through the zbound filter with h5py and read back.

Each field is written with chunks that leave partial edge chunks, at ABS bounds of 1e-2, 1e-3 and 1e-4 times the
range of the field's finite, non-fill values (the filter's REL mode is per chunk, so a whole-field relative bound
is given to it as ABS). Every value read back must be within the bound; NaN (with payload), +-Inf, -0.0 and the
fill value must come back bit for bit, and every chunk must really have gone through the filter.
A second test writes a few fields in REL mode and checks each chunk against the bound stored in its stream.

Sources (see ../shared/data/README.md): netCDF-4/HDF5 files are read with h5py, netCDF-3 files with netCDF4-python,
PLOT3D q files from their raw big-endian layout (kept big-endian, so the filter's byte-order path runs too).
The fill value of a field is its _FillValue attribute (what netCDF-4 stores as the HDF5 fill value).
"""

import functools
import os
import struct

import numpy as np
import pytest

from conftest import (
    CD_MAX_WORDS,
    DATA_DIR,
    FILTER_ID,
    assert_within,
    edge_chunks,
    field_abs_bound,
    stream_abs_bound,
    uint_view,
    zbound_kwargs,
)
import h5py

pytestmark = pytest.mark.usefixtures("require_plugin")

RELS = (1e-2, 1e-3, 1e-4)


@pytest.fixture(autouse=True)
def _one_codec_thread(monkeypatch):
    """One codec thread: this module pushes ~100 fields through the filter on a small shared machine, where the
    codec's OpenMP threads on chunks of a few hundred KB spend more time waiting for each other than working.
    (Threaded chunks are covered by the other filter tests.) An explicit ZBOUND_THREADS is kept."""
    if "ZBOUND_THREADS" not in os.environ:
        monkeypatch.setenv("ZBOUND_THREADS", "1")

H5_FILES = ("gmt_sst.nc", "gmt_data_w_nans.nc", "gmt_geoid_1m.nc", "radar_rainsum_f64.h5", "gpm_2a_ku_volume.h5")
NC3_FILES = (
    "cesm_trefht_b06_57.nc",
    "cesm_trefht_b06_59.nc",
    "cesm_trefht_b06_60.nc",
    "cesm_trefht_b06_61.nc",
    "ncep_06_climo.nc",
)
PLOT3D_FILES = ("nasa_cfd_combq.bin", "nasa_cfd_postq.bin")


def _fill_of(attrs, dtype):
    v = attrs.get("_FillValue") if hasattr(attrs, "get") else None
    if v is None:
        return None
    return np.asarray(v, dtype=dtype).reshape(-1)[0]


@functools.lru_cache(maxsize=None)
def _h5_fields(name):
    out = {}
    with h5py.File(DATA_DIR / name, "r") as f:

        def visit(path, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" and obj.size > 1:
                out[path] = (obj[...], _fill_of(obj.attrs, obj.dtype))

        f.visititems(visit)
    return out


@functools.lru_cache(maxsize=None)
def _nc3_fields(name):
    import netCDF4

    out = {}
    with netCDF4.Dataset(DATA_DIR / name) as ds:
        for vname, var in ds.variables.items():
            if var.dtype.kind != "f" or var.size <= 1:
                continue
            var.set_auto_maskandscale(False)
            fill = getattr(var, "_FillValue", None)
            out[vname] = (np.asarray(var[...]), None if fill is None else np.asarray(fill, var.dtype).reshape(-1)[0])
    return out


@functools.lru_cache(maxsize=None)
def _plot3d_fields(name):
    raw = (DATA_DIR / name).read_bytes()
    ni, nj, nk = struct.unpack(">3i", raw[:12])
    q = np.frombuffer(raw[28:], ">f4", count=5 * nk * nj * ni).reshape(5, nk, nj, ni)
    return {f"q{i}": (np.array(q[i]), None) for i in range(5)}


def _loader(name):
    if name in H5_FILES:
        return _h5_fields
    if name in NC3_FILES:
        return _nc3_fields
    return _plot3d_fields


def _field_ids():
    """(file, variable) of every float field; enumerated from the files' metadata only."""
    ids = []
    if not DATA_DIR.is_dir():
        return ids
    for name in H5_FILES:
        with h5py.File(DATA_DIR / name, "r") as f:
            f.visititems(
                lambda p, o: ids.append((name, p))
                if isinstance(o, h5py.Dataset) and o.dtype.kind == "f" and o.size > 1
                else None
            )
    try:
        import netCDF4

        for name in NC3_FILES:
            with netCDF4.Dataset(DATA_DIR / name) as ds:
                ids += [(name, v) for v, var in ds.variables.items() if var.dtype.kind == "f" and var.size > 1]
    except ImportError:
        pass
    for name in PLOT3D_FILES:
        ids += [(name, f"q{i}") for i in range(5)]
    return ids


FIELDS = _field_ids()


def load(file, var):
    return _loader(file)(file)[var]


def _assert_all_chunks_filtered(ds):
    """Every stored chunk went through zbound (no chunk left unfiltered by the optional flag)."""
    dsid = ds.id
    for i in range(dsid.get_num_chunks()):
        info = dsid.get_chunk_info(i)
        assert info.filter_mask == 0, f"chunk {info.chunk_offset} was stored without the filter"


def test_every_data_file_is_covered():
    if not DATA_DIR.is_dir():
        pytest.skip("no real data")
    pytest.importorskip("netCDF4", reason="netCDF4-python reads the netCDF-3 files (cesm_*, ncep_*)")
    covered = {f for f, _ in FIELDS}
    on_disk = {p.name for p in DATA_DIR.iterdir() if p.suffix in (".nc", ".h5", ".bin")}
    assert on_disk <= covered, f"files without float fields in this test: {sorted(on_disk - covered)}"
    assert len(FIELDS) > 90


@pytest.mark.parametrize("file,var", FIELDS, ids=[f"{f}:{v}" for f, v in FIELDS])
def test_field_within_bound(file, var, tmp_path):
    data, fill = load(file, var)
    chunks = edge_chunks(data.shape)
    path = tmp_path / "field.h5"
    bounds = {}
    with h5py.File(path, "w") as f:
        for k, rel in enumerate(RELS):
            eb = field_abs_bound(data, rel, fill)
            bounds[k] = eb
            ds = f.create_dataset(f"r{k}", data=data, chunks=chunks, fillvalue=fill, **zbound_kwargs("abs", eb))
            cd = ds.id.get_create_plist().get_filter_by_id(FILTER_ID)[1]
            assert len(cd) == CD_MAX_WORDS
            assert cd[7] == (1 if fill is not None else 0)
    with h5py.File(path, "r") as f:
        for k, rel in enumerate(RELS):
            ds = f[f"r{k}"]
            _assert_all_chunks_filtered(ds)
            back = ds[...]
            assert back.dtype == data.dtype
            assert_within(data, back, bounds[k], fill, what=f"{file}:{var} at {rel} of the range (abs {bounds[k]!r})")


# Fields for the per-chunk REL check: NaN land mask, fill-heavy 3D radar volume, 4D with a declared fill value,
# f64 without a fill value (edge padding of 0 takes part in the range), big-endian PLOT3D.
REL_FIELDS = [
    ("gmt_sst.nc", "z"),
    ("gpm_2a_ku_volume.h5", "NS/SLV/precipRate"),
    ("ncep_06_climo.nc", "T"),
    ("radar_rainsum_f64.h5", "data"),
    ("nasa_cfd_postq.bin", "q1"),
]


@pytest.mark.parametrize("file,var", REL_FIELDS, ids=[f"{f}:{v}" for f, v in REL_FIELDS])
def test_rel_bound_per_chunk(file, var, tmp_path):
    if (file, var) not in FIELDS:
        pytest.skip(f"{file}:{var} not available")
    data, fill = load(file, var)
    rel = 1e-3
    chunks = edge_chunks(data.shape)
    path = tmp_path / "rel.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=chunks, fillvalue=fill, **zbound_kwargs("rel", rel))
    fill_bits = None if fill is None else uint_view(np.array([fill], dtype=data.dtype))[0]
    with h5py.File(path, "r") as f:
        ds = f["x"]
        back = ds[...]
        nchunks = 0
        for sl in ds.iter_chunks():
            offset = tuple(s.start for s in sl)
            mask, raw = ds.id.read_direct_chunk(offset)
            assert mask == 0
            eb = stream_abs_bound(raw)
            region = data[sl]
            ok = np.isfinite(region)
            if fill_bits is not None:
                ok &= uint_view(region) != fill_bits
            vals = region[ok].astype(np.float64)
            partial = any(s.stop - s.start < c for s, c in zip(sl, chunks))
            if partial and fill is None:
                vals = np.append(vals, 0.0)  # HDF5 pads the edge chunk with 0, the default fill value
            expect = rel * (vals.max() - vals.min()) if vals.size else 0.0
            assert eb == pytest.approx(expect, rel=1e-12, abs=0), f"chunk at {offset}"
            assert_within(region, back[sl], eb, fill, what=f"{file}:{var} chunk at {offset} (abs {eb!r})")
            nchunks += 1
        assert nchunks > 1
