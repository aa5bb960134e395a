"""netCDF-4 and the HDF5 tools with the plugin that the package bundles (HDF5_PLUGIN_PATH=zbound.PLUGIN_PATH):
the C example (nc_def_var_filter), nccopy -F on every netCDF file of ../shared/data with ncdump reading the result
back at full precision, and h5repack -f UD=... (the string from the package's `zbound cdvalues`) on the
gzip-chunked GPM file. (test_cli.py / test_h5_tools.py cover nccopy and h5repack with the build tree's plugin on
one variable each; here: every file, the packaged plugin and CLI, ncdump's values.)"""
import re
import shutil
import subprocess

import numpy as np
import pytest

from conftest import BUILD_DIR
from test_pkg_common import (DATA_DIR, assert_within, filters_of, h5_datasets, need_tool, pkg_env, run, zb_cli,
                             zbound)
import h5py

NC_FILES = sorted(p.name for p in DATA_DIR.glob("*.nc")) if DATA_DIR.is_dir() else []


def _nc_example(tmp_path):
    """The example as built by CMake (examples/CMakeLists.txt), or compiled here when that build lacks it."""
    exe = BUILD_DIR / "examples" / "nc_filter"
    if exe.exists():
        return exe
    if shutil.which("pkg-config") is None or subprocess.run(["pkg-config", "--exists", "netcdf"]).returncode:
        pytest.fail("libnetcdf (pkg-config netcdf) not found: apt-get install libnetcdf-dev")
    cc = shutil.which("cc") or shutil.which("gcc")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "netcdf"], capture_output=True, text=True).stdout
    out = tmp_path / "nc_filter"
    run([cc, str(BUILD_DIR.parent / "examples" / "nc_filter.c"), "-o", out, *flags.split(), "-lm"])
    return out


def test_c_example_nc_def_var_filter(tmp_path):
    exe = _nc_example(tmp_path)
    out = tmp_path / "example.nc"
    eb = 0.02
    p = run([exe, out, repr(eb)], env=pkg_env())
    m = re.search(r"max error ([0-9.eE+-]+) \(bound ([0-9.eE+-]+)\), (\d+) fill values, (\d+) violations", p.stdout)
    assert m and int(m.group(4)) == 0 and int(m.group(3)) > 0, p.stdout
    # h5py (its own HDF5) and ncdump (the system's) read it; the compressed variable against the raw copy
    with h5py.File(out, "r") as f:
        assert filters_of(f["temperature"]) == [33000]
        assert not filters_of(f["temperature_raw"])
        assert_within(f["temperature_raw"][...], f["temperature"][...], eb, fill=np.float32(-9999.0))
    need_tool("ncdump")
    hdr = run(["ncdump", "-hs", out], env=pkg_env()).stdout
    assert re.search(r'temperature:_Filter = "33000,', hdr), hdr
    # without the plugin the example says so (exit 2) instead of writing unfiltered data
    p = run([exe, tmp_path / "x.nc"], env=pkg_env(plugin_path=False, HDF5_PLUGIN_PATH=tmp_path / "none"),
            check=False)
    assert p.returncode == 2 and "HDF5_PLUGIN_PATH" in p.stderr


def _ncdump_values(path, var):
    """A variable's values as ncdump prints them at full precision (-p 9,17), fill values as '_' -> NaN."""
    text = run(["ncdump", "-p", "9,17", "-v", var, path], env=pkg_env()).stdout
    body = text.split("data:", 1)[1]
    body = body.split(f"{var} =", 1)[1].rsplit(";", 1)[0]
    vals = [float("nan") if t.strip() == "_" else float(t) for t in body.replace("\n", " ").split(",") if t.strip()]
    return np.array(vals)


def _float_vars(path):
    """{var: (values, fill)} of the float variables of a netCDF file (read with h5py after conversion)."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, ds in h5_datasets(f).items():
            if ds.dtype.kind == "f" and ds.ndim >= 1 and b"DIMENSION_SCALE" not in bytes(ds.attrs.get("CLASS", b"")):
                fill = ds.attrs["_FillValue"][0] if "_FillValue" in ds.attrs else None
                out[name.lstrip("/")] = (ds[...], fill)
    return out


@pytest.mark.parametrize("name", NC_FILES)
def test_nccopy_every_netcdf_file_and_ncdump_reads_it(tmp_path, name):
    """nccopy -F with one `zbound cdvalues --format nccopy --var V` spec per float variable (nccopy applies a
    filter as mandatory, so '*' fails on files with integer variables). nccopy 4.9 ignores -F for a variable that
    already has filters (deflate, shuffle): netCDF-4 inputs lose them first with nccopy -d0, and netCDF-3 inputs
    become netCDF-4 in the same step."""
    need_tool("nccopy")
    need_tool("ncdump")
    src = DATA_DIR / name
    plain = tmp_path / ("plain_" + name)
    run(["nccopy", "-k", "nc4", "-d0", src, plain])
    ref = _float_vars(plain)
    assert ref, name
    eb = 0.01
    specs = []
    for var in ref:
        spec = zb_cli("cdvalues", "--abs", repr(eb), "--format", "nccopy", "--var", var).stdout.strip()
        assert spec.startswith(f"{var},33000,")
        specs += ["-F", spec]
    dst = tmp_path / ("zb_" + name)
    run(["nccopy", *specs, plain, dst], env=pkg_env())
    with h5py.File(dst, "r") as f:
        for var, (vals, fill) in ref.items():
            assert filters_of(f[var]) == [33000], var
            assert_within(vals, f[var][...], eb, fill=fill, what=f"{name}:{var} (h5py)")
    # ncdump (netCDF-C, the system's HDF5 1.10, the packaged plugin) reads a variable back (the largest one of at
    # most 600k values: ncdump's text is slow to parse)
    small = [v for v in ref if ref[v][0].size <= 600_000]
    var = max(small, key=lambda v: ref[v][0].size) if small else min(ref, key=lambda v: ref[v][0].size)
    vals, fill = ref[var]
    got = _ncdump_values(dst, var)
    want = vals.reshape(-1).astype(np.float64)
    assert got.size == want.size
    special = ~np.isfinite(want)
    if fill is not None:
        special |= want == float(fill)
    # ncdump -p 9,17 prints floats with 9 significant digits and doubles with 17: exact for both
    assert np.all(np.abs(got[~special] - want[~special]) <= eb), f"{name}:{var} via ncdump"
    assert np.all(np.isnan(got[special]) | (got[special] == want[special]))


def test_h5repack_gpm_with_the_cdvalues_string(tmp_path):
    """h5repack (HDF5 1.10) recompresses the gzip-chunked GPM file with `zbound cdvalues --format h5repack`;
    every float dataset reads back within the bound, every other one unchanged, and `zbound h5 verify` agrees."""
    need_tool("h5repack")
    src = DATA_DIR / "gpm_2a_ku_volume.h5"
    dst = tmp_path / "gpm_h5repack.h5"
    eb = 0.05
    ud = zb_cli("cdvalues", "--abs", repr(eb), "--format", "h5repack").stdout.strip()
    assert ud.startswith("UD=33000,0,6,")
    run(["h5repack", "-f", ud, src, dst], env=pkg_env())
    nfloat = 0
    with h5py.File(src, "r") as a, h5py.File(dst, "r") as b:
        da, db = h5_datasets(a), h5_datasets(b)
        assert set(da) == set(db)
        for p, x in da.items():
            y = db[p]
            if x.dtype.kind == "f" and x.chunks is not None:
                assert filters_of(y) == [33000], p
                assert_within(x[...], y[...], eb, what=p)
                nfloat += 1
            else:
                assert x.dtype == y.dtype and np.array_equal(x[...], y[...]), p
    assert nfloat > 40
    p = zb_cli("h5", "verify", src, dst)
    assert "verify: ok" in p.stdout
