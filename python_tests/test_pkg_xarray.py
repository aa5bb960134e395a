"""xarray: to_netcdf through h5netcdf with zbound.Filter as the encoding, and to_zarr with the codec; open_dataset
reads both back (in a fresh process too, for netCDF with the plugin path only)."""
import numpy as np
import pytest

from test_pkg_common import DATA_DIR, assert_within, filters_of, pkg_env, python, zbound, chunk_bounds

xr = pytest.importorskip("xarray")
pytest.importorskip("h5netcdf")
import h5py  # noqa: E402


@pytest.fixture(scope="module")
def sst():
    """gmt_sst.nc as an xarray Dataset (NaN over land)."""
    with h5py.File(DATA_DIR / "gmt_sst.nc", "r") as f:
        z = f["z"][...]
        x, y = f["x"][...], f["y"][...]
    ds = xr.Dataset({"sst": (("y", "x"), z, {"units": "degC", "long_name": "sea surface temperature"})},
                    coords={"y": y, "x": x}, attrs={"title": "zbound xarray test"})
    return ds


def test_to_netcdf_h5netcdf_round_trip(tmp_path, sst):
    path = tmp_path / "sst.nc"
    filt = zbound.Filter(rel=1e-3, data=sst.sst)
    eb = filt.bound
    fin = sst.sst.values[np.isfinite(sst.sst.values)].astype(np.float64)
    assert eb == pytest.approx(1e-3 * (fin.max() - fin.min()), rel=1e-12)
    enc = {"sst": {**filt, "chunksizes": (270, 540)}}
    sst.to_netcdf(path, engine="h5netcdf", encoding=enc)
    with h5py.File(path, "r") as f:
        assert filters_of(f["sst"]) == [33000]
        assert f["sst"].chunks == (270, 540)
        assert set(chunk_bounds(f["sst"]).values()) == {eb}
        assert f["sst"].id.get_storage_size() < sst.sst.nbytes / 2
    with xr.open_dataset(path, engine="h5netcdf") as back:
        assert back.attrs["title"] == "zbound xarray test"
        assert back.sst.attrs["units"] == "degC"
        assert np.array_equal(back.x.values, sst.x.values) and np.array_equal(back.y.values, sst.y.values)
        assert_within(sst.sst.values, back.sst.values, eb)
    # also the netCDF-C library (netCDF4-python, its own HDF5) reads it, when installed, with the plugin path
    code = f"""
import numpy as np, sys
try:
    import netCDF4
except ImportError:
    print('skip'); sys.exit(0)
with netCDF4.Dataset({str(path)!r}) as d:
    v = d['sst']; v.set_auto_maskandscale(False); np.save(sys.argv[1], v[...])
print('ok')
"""
    p = python(code, str(tmp_path / "nc.npy"), env=pkg_env())
    if p.stdout.strip() == "ok":
        assert_within(sst.sst.values, np.load(tmp_path / "nc.npy"), eb)


def test_to_netcdf_h5netcdf_fill_value_and_f64(tmp_path):
    t = np.linspace(0, 20, 240)
    v = (np.sin(t)[:, None] * np.cos(np.linspace(0, 3, 50))[None, :] * 30 + 280).astype("f8")
    v[5:9, 10:20] = np.nan
    ds = xr.Dataset({"T": (("t", "k"), v)}, coords={"t": t})
    ds.T.encoding["_FillValue"] = -999.0
    path = tmp_path / "t.nc"
    ds.to_netcdf(path, engine="h5netcdf", encoding={"T": {**zbound.Filter(abs=1e-4), "_FillValue": -999.0,
                                                           "chunksizes": (64, 50)}})
    with h5py.File(path, "r") as f:
        raw = f["T"][...]
        assert np.all(raw[5:9, 10:20] == -999.0)  # NaN written as the fill value, kept exactly
    with xr.open_dataset(path, engine="h5netcdf") as back:
        assert np.isnan(back.T.values[5:9, 10:20]).all()
        assert_within(v, back.T.values, 1e-4)


@pytest.mark.parametrize("fmt", [2, 3])
def test_to_zarr_with_the_codec(tmp_path, sst, fmt):
    pytest.importorskip("zarr")
    eb = 1e-2
    codec = ({"compressors": [zbound.Zbound(abs=eb)]} if fmt == 2 else
             {"serializer": zbound.ZboundCodec(abs=eb), "compressors": None})
    store = tmp_path / f"sst_v{fmt}.zarr"
    small = sst.isel(y=slice(0, 540))
    small.to_zarr(store, zarr_format=fmt, encoding={"sst": {**codec, "chunks": (135, 540)}}, consolidated=False)
    code = f"""
import numpy as np, xarray as xr, sys
ds = xr.open_zarr({str(store)!r}, consolidated=False)
np.save(sys.argv[1], ds.sst.values)
assert ds.sst.attrs['units'] == 'degC'
"""
    python(code, str(tmp_path / "z.npy"), env=pkg_env())
    assert_within(small.sst.values, np.load(tmp_path / "z.npy"), eb)
