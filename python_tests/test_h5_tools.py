"""The plugin under the system's HDF5 command-line tools (Debian's HDF5 1.10: h5repack, h5dump), the C example,
and files crossing between HDF5 versions (h5py's bundled HDF5 2.x and the system's 1.10) and between two HDF5
libraries in one process (h5py's and netCDF4-python's)."""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import (
    BUILD_DIR,
    DATA_DIR,
    FILTER_ID,
    PLUGIN_DIR,
    REPO_ROOT,
    assert_within,
    cd_values,
    edge_chunks,
    zbound_kwargs,
)
import h5py

pytestmark = [
    pytest.mark.usefixtures("require_plugin"),
    pytest.mark.skipif(shutil.which("h5repack") is None or shutil.which("h5dump") is None,
                       reason="h5repack/h5dump not installed"),
]


def ud(flag, mode, bound):
    """h5repack's UD= filter string for zbound."""
    words = cd_values(mode, bound)
    return f"UD={FILTER_ID},{flag},{len(words)}," + ",".join(str(w) for w in words)


def run(cmd, env, check=True):
    p = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def h5dump_values(path, dset, dtype, env, tmp_path):
    """Values of a dataset as h5dump (system HDF5) reads them, through its binary output."""
    out = tmp_path / (dset.strip("/").replace("/", "_") + ".bin")
    le = np.dtype(dtype).newbyteorder("<")
    run(["h5dump", "-d", dset, "-b", "LE", "-o", out, path], env)
    return np.fromfile(out, dtype=le)


def filters_of(ds):
    pl = ds.id.get_create_plist()
    return [pl.get_filter(i)[0] for i in range(pl.get_nfilters())]


def test_h5repack_whole_file_and_h5dump(tmp_path, tool_env, data_dir):
    """h5repack -f UD=33000,0,... over the whole GPM file (gzip-chunked, floats and ints, fill -9999.9 data)."""
    src = data_dir / "gpm_2a_ku_volume.h5"
    dst = tmp_path / "gpm_zbound.h5"
    eb = 1e-2
    run(["h5repack", "-f", ud(0, "abs", eb), src, dst], tool_env)
    nfloat = 0
    with h5py.File(src, "r") as a, h5py.File(dst, "r") as b:
        names = []
        a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in names:
            x, y = a[n], b[n]
            if x.dtype.kind == "f" and x.chunks is not None:
                # h5repack (mandatory filter) applies zbound to every float dataset; can_apply keeps ints out.
                assert FILTER_ID in filters_of(y), n
                assert_within(x[...], y[...], eb, what=n)
                nfloat += 1
            else:
                assert FILTER_ID not in filters_of(y), n
                assert np.array_equal(x[...], y[...]), n
    assert nfloat > 40
    # The system's h5dump (HDF5 1.10) reads what its h5repack wrote, through the plugin.
    with h5py.File(src, "r") as a:
        for n in ("/NS/SLV/precipRate", "/NS/SLV/paramDSD", "/NS/Latitude"):
            ref = a[n][...]
            got = h5dump_values(dst, n, ref.dtype, tool_env, tmp_path).reshape(ref.shape)
            assert_within(ref, got, eb, what=f"h5dump {n}")


def test_h5repack_per_object_optional_f64_and_h5dump_without_plugin(tmp_path, tool_env, data_dir):
    src = data_dir / "radar_rainsum_f64.h5"
    dst = tmp_path / "radar_zbound.h5"
    with h5py.File(src, "r") as f:
        ref = f["data"][...]
    eb = 1e-3 * float(ref.max() - ref.min())
    run(["h5repack", "-f", "/data:" + ud(1, "abs", eb), "-l", "/data:CHUNK=100x300", src, dst], tool_env)
    with h5py.File(dst, "r") as f:
        assert filters_of(f["data"]) == [FILTER_ID]
        assert f["data"].chunks == (100, 300)  # partial edge chunks: 360x1000
        back = f["data"][...]
        assert f["data"].id.get_storage_size() < ref.nbytes
    assert_within(ref, back, eb, what="h5py read of h5repack output")
    got = h5dump_values(dst, "/data", "<f8", tool_env, tmp_path).reshape(ref.shape)
    assert_within(ref, got, eb, what="h5dump read")
    # Without the plugin h5dump cannot read the data: proves the plugin was what decoded it above.
    env = dict(tool_env)
    env["HDF5_PLUGIN_PATH"] = str(tmp_path / "nothing_here")
    p = run(["h5dump", "-d", "/data", "-b", "LE", "-o", tmp_path / "none.bin", dst], env, check=False)
    assert p.returncode != 0 or (tmp_path / "none.bin").stat().st_size == 0


def test_h5repack_bad_cd_values_are_reported(tmp_path, tool_env, data_dir):
    """h5repack 1.10 copies a dataset unfiltered when creating it with the filter fails; with -E it prints the
    HDF5 error stack, which must carry zbound's reason."""
    src = data_dir / "radar_rainsum_f64.h5"
    dst = tmp_path / "bad.h5"
    p = run(["h5repack", "-E", "-f", f"/data:UD={FILTER_ID},0,2,1,9", src, dst], tool_env, check=False)
    out = p.stdout + p.stderr
    assert "zbound: invalid cd_values: cd_values[1] = 9" in out, out[-3000:]
    if p.returncode == 0:
        with h5py.File(dst, "r") as f:
            assert FILTER_ID not in filters_of(f["data"])


def test_h5dump_reads_files_written_by_h5py(tmp_path, tool_env):
    """Written with h5py's HDF5 2.x, read with the system's HDF5 1.10: f32, f64 and big-endian f32."""
    rng = np.random.default_rng(1)
    base = np.cumsum(rng.normal(size=(130, 77)), axis=1)
    arrays = {"f32": base.astype("<f4"), "f64": base.astype("<f8"), "be32": base.astype(">f4")}
    arrays["f32"][5, 5] = np.nan
    eb = 1e-3
    path = tmp_path / "from_h5py.h5"
    with h5py.File(path, "w") as f:
        for k, a in arrays.items():
            f.create_dataset(k, data=a, chunks=edge_chunks(a.shape), **zbound_kwargs("abs", eb))
    for k, a in arrays.items():
        got = h5dump_values(path, "/" + k, a.dtype, tool_env, tmp_path).reshape(a.shape)
        assert_within(a, got, eb, what=f"h5dump /{k}")


def test_c_example(tmp_path, tool_env):
    exe = BUILD_DIR / "examples" / "h5_write_read"
    if not exe.exists():
        pytest.skip(f"{exe} not built")
    out = tmp_path / "example.h5"
    p = run([exe, out, "1e-3"], tool_env)
    m = re.search(r"ratio ([0-9.]+), max error ([0-9.eE+-]+) \(bound ([0-9.eE+-]+)\)", p.stdout)
    assert m, p.stdout
    assert float(m.group(1)) > 1.0
    assert float(m.group(2)) <= float(m.group(3))
    # Written with HDF5 1.10, read with h5py's HDF5 2.x: the example's field, recomputed here.
    nz, ny, nx = 60, 90, 120
    i = np.arange(nz * ny * nx, dtype=np.float64)
    x, y, z = i % nx, (i // nx) % ny, i // (nx * ny)
    ref = (280.0 + 15.0 * np.sin(0.07 * x) * np.cos(0.05 * y) + 0.2 * z + 0.01 * np.sin(1.7 * i)).astype(np.float32)
    with h5py.File(out, "r") as f:
        back = f["temperature"][...].ravel()
    # One float32 ulp of slack (3.1e-5 near 300) for libm and numpy rounding sin() differently by a bit.
    assert_within(ref, back, 1e-3 + 3.1e-5, what="example file read by h5py")
    # Without HDF5_PLUGIN_PATH the example says what is missing instead of writing unfiltered data.
    env = dict(tool_env)
    env["HDF5_PLUGIN_PATH"] = str(tmp_path / "nothing_here")
    p = run([exe, tmp_path / "x.h5"], env, check=False)
    assert p.returncode == 2 and "HDF5_PLUGIN_PATH" in p.stderr


def test_two_hdf5_libraries_in_one_process(tmp_path):
    """h5py and netCDF4-python each bundle their own libhdf5; both load the same plugin, and each must get its
    own HDF5 API table (ZBOUND_LOG names the library serving each caller)."""
    pytest.importorskip("netCDF4")
    script = f"""
import h5py, netCDF4, numpy as np, sys
sys.path.insert(0, {str(os.path.dirname(__file__))!r})
from conftest import zbound_kwargs
a = np.linspace(-5, 5, 300 * 70, dtype='f4').reshape(300, 70)
with h5py.File({str(tmp_path / 'two.h5')!r}, 'w') as f:
    f.create_dataset('x', data=a, chunks=(64, 32), **zbound_kwargs('abs', 1e-3))
with netCDF4.Dataset({str(tmp_path / 'two.h5')!r}) as d:
    b = np.asarray(d.variables['x'][...])
with h5py.File({str(tmp_path / 'two.h5')!r}) as f:
    c = f['x'][...]
assert np.abs(a - b).max() <= 1e-3 and np.abs(a - c).max() <= 1e-3
print('ok')
"""
    env = dict(os.environ)
    env["HDF5_PLUGIN_PATH"] = str(PLUGIN_DIR)
    env["ZBOUND_LOG"] = "1"
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "ok" in p.stdout, p.stderr
    libs = set(re.findall(r"zbound: HDF5 filter uses (\S+)", p.stderr))
    assert len(libs) == 2, p.stderr
    assert any("h5py" in s for s in libs) and any("netCDF4" in s or "netcdf4" in s for s in libs), libs


def test_h5py_example(tmp_path):
    script = REPO_ROOT / "examples" / "h5py_write_read.py"
    env = dict(os.environ)
    env["HDF5_PLUGIN_PATH"] = str(PLUGIN_DIR)
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "ex.h5"), "1e-4"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "NaN kept: True" in p.stdout


@pytest.mark.skipif(shutil.which("nccopy") is None, reason="nccopy not installed")
def test_nccopy_to_netcdf4_with_the_filter(tmp_path, tool_env, data_dir):
    """netCDF-C's nccopy -F (system netCDF/HDF5 1.10) converts a netCDF-3 file to netCDF-4 through the filter;
    h5py and netCDF4-python (each with its own HDF5) read the result."""
    netCDF4 = pytest.importorskip("netCDF4")
    src = data_dir / "ncep_06_climo.nc"
    dst = tmp_path / "ncep_zbound.nc"
    eb = 1e-2
    words = ",".join(str(w) for w in cd_values("abs", eb))
    run(["nccopy", "-k", "nc4", "-F", f"T,{FILTER_ID},{words}", "-F", f"U,{FILTER_ID},{words}", src, dst], tool_env)
    with netCDF4.Dataset(src) as ds:
        ref = {}
        for v in ("T", "U", "V"):
            ds.variables[v].set_auto_maskandscale(False)
            ref[v] = np.asarray(ds.variables[v][...])
    with h5py.File(dst, "r") as f:
        for v in ("T", "U"):
            assert filters_of(f[v]) == [FILTER_ID], v
            assert_within(ref[v], f[v][...], eb, what=f"h5py {v}")
        assert FILTER_ID not in filters_of(f["V"]) if f["V"].chunks else True
    with netCDF4.Dataset(dst) as ds:
        for v in ("T", "U"):
            ds.variables[v].set_auto_maskandscale(False)
            assert_within(ref[v], np.asarray(ds.variables[v][...]), eb, what=f"netCDF4 {v}")
