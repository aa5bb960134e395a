"""zbound.Filter: the HDF5 filter's parameters as a mapping for h5py, h5netcdf and xarray."""
import struct
from collections.abc import Mapping

import numpy as np

from . import _lib
from ._api import _mode_and_bound

FILTER_ID = 33000  # ZBOUND_H5Z_FILTER in filter/zbound_filter.h
CD_LAYOUT_VERSION = 1  # ZBOUND_CD_LAYOUT_VERSION


def cd_values(mode="abs", bound=1e-3, predictor="auto", encoder="auto"):
    """The six user cd_values words (filter/zbound_filter.h): [1, mode, bound high word, bound low word,
    predictor, encoder], the bound being an IEEE-754 double split high word first."""
    bits = struct.unpack("<Q", struct.pack("<d", float(bound)))[0]
    return (CD_LAYOUT_VERSION, _lib.MODES[mode], bits >> 32, bits & 0xFFFFFFFF, _lib.PREDICTORS[predictor],
            _lib.ENCODERS[encoder])


def parse_cd_values(cd):
    """(mode, bound, predictor, encoder) from cd_values words as stored in a dataset (any length the filter
    accepts; missing words take the filter's defaults: rel 1e-3, auto, auto)."""
    cd = [int(w) for w in cd]
    names = lambda table: {v: k for k, v in table.items()}  # noqa: E731
    mode = names(_lib.MODES).get(cd[1], cd[1]) if len(cd) > 1 else "rel"
    bound = struct.unpack(">d", struct.pack(">II", cd[2], cd[3]))[0] if len(cd) > 3 else 1e-3
    pred = names(_lib.PREDICTORS).get(cd[4], cd[4]) if len(cd) > 4 else "auto"
    enc = names(_lib.ENCODERS).get(cd[5], cd[5]) if len(cd) > 5 else "auto"
    return mode, bound, pred, enc


def finite_range(data, fill=None):
    """max - min over the finite values of `data` (numpy, dask, xarray, h5py dataset), fill values left out;
    0.0 when there are none."""
    inner = getattr(data, "data", None)
    if inner is not None and type(inner).__module__.startswith("dask"):
        data = inner  # xarray backed by dask: reduce lazily
    elif hasattr(data, "values") and not isinstance(data, np.ndarray) and not callable(data.values):
        data = data.values  # xarray / pandas in memory
    if type(data).__module__.startswith("dask"):
        import dask.array as da
        ok = da.isfinite(data)
        if fill is not None:
            ok &= data != fill
        masked = da.where(ok, data, np.nan)
        lo, hi = da.compute(da.nanmin(masked), da.nanmax(masked))
    else:
        a = np.asarray(data[...] if hasattr(data, "id") else data)
        if np.ma.isMaskedArray(a):
            a = a.compressed()
        ok = np.isfinite(a)
        if fill is not None:
            ok &= a != fill
        if not ok.any():
            return 0.0
        v = a[ok]
        lo, hi = v.min(), v.max()
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return 0.0
    return hi - lo


def probe(mode, bound, predictor, encoder):
    """Asks the library whether it can write these parameters (compresses a few values). Raises the library's
    error (for example UnsupportedError from a build without a feature) instead of letting HDF5 fail later."""
    from ._api import compress
    compress(np.linspace(0, 1, 64, dtype=np.float32), **{mode: bound}, predictor=predictor, encoder=encoder)


class Filter(Mapping):
    """zbound's HDF5 filter as keyword arguments for h5py and an encoding for xarray (h5netcdf):

        f.create_dataset("T", data=a, chunks=(64, 64), **zbound.Filter(abs=1e-3))
        ds.to_netcdf("out.nc", engine="h5netcdf", encoding={"T": zbound.Filter(rel=1e-3, data=ds.T)})

    Exactly one bound: abs= (absolute), rel= (relative to the finite value range of each HDF5 chunk, since HDF5
    compresses chunks independently), pw_rel= (point-wise relative: |x - x'| <= pw_rel * |x|). With data=,
    a rel bound is turned into the absolute bound rel * (max - min) over the finite values of the whole array
    (fill= values left out), so that every chunk shares one bound. predictor: 'auto', 'lorenzo', 'interp';
    encoder: 'auto', 'fast', 'ratio'. Parameters the library cannot write raise zbound.UnsupportedError here.

    The mapping has the keys 'compression' (33000) and 'compression_opts' (the cd_values), as hdf5plugin's filters.
    """

    filter_id = FILTER_ID

    def __init__(self, abs=None, rel=None, pw_rel=None, predictor="auto", encoder="auto", data=None, fill=None):
        mode, bound = _mode_and_bound(abs, rel, pw_rel)
        self.requested = (mode, bound)
        if data is not None:
            if mode != "rel":
                raise ValueError("zbound.Filter: data= converts a rel bound to abs; it needs rel=")
            mode, bound = "abs", bound * finite_range(data, fill)
        for name, table, v in (("predictor", _lib.PREDICTORS, predictor), ("encoder", _lib.ENCODERS, encoder)):
            if v not in table:
                raise ValueError(f"zbound.Filter: {name} must be one of {', '.join(table)}; got {v!r}")
        probe(mode, bound, predictor, encoder)
        self.mode, self.bound, self.predictor, self.encoder = mode, bound, predictor, encoder
        self.filter_options = cd_values(mode, bound, predictor, encoder)
        self._kwargs = {"compression": FILTER_ID, "compression_opts": self.filter_options}

    def __getitem__(self, key):
        return self._kwargs[key]

    def __iter__(self):
        return iter(self._kwargs)

    def __len__(self):
        return len(self._kwargs)

    def __repr__(self):
        return (f"zbound.Filter({self.mode}={self.bound!r}, predictor={self.predictor!r}, "
                f"encoder={self.encoder!r})")

    def h5repack(self, flag=0):
        """The h5repack -f string (flag 0: mandatory, 1: optional)."""
        return f"UD={FILTER_ID},{flag},{len(self.filter_options)}," + ",".join(map(str, self.filter_options))

    def nccopy(self, var="*"):
        """The nccopy -F string for variable `var` (or every variable)."""
        return f"{var},{FILTER_ID}," + ",".join(map(str, self.filter_options))
