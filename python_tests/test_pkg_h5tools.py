"""`zbound h5 repack` and `zbound h5 verify` on every file of ../shared/data: float datasets recompressed within the
bound, everything else identical (checked here with h5py, independently of verify), verify catching changes,
the progress bar on a terminal only, errors naming the dataset, the C++ CLI forwarding to the package."""
import os
import pty
import select
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import BUILD_DIR
from test_pkg_common import (BUNDLED_CLI, DATA_DIR, PY_CLI, assert_within, filters_of, h5_datasets, need_tool,
                             pkg_env, run, zb_cli, zbound)
import h5py

EB = 1e-2
SKIP_ATTRS = ("DIMENSION_LIST", "REFERENCE_LIST")


def _plot3d_to_h5(src, dst):
    """A PLOT3D q file as HDF5: the big-endian float32 block as a contiguous dataset (repack must choose chunks
    and keep the byte order), the header as an int dataset and attributes."""
    raw = src.read_bytes()
    ni, nj, nk = struct.unpack(">3i", raw[:12])
    mach, alpha, re, t = struct.unpack(">4f", raw[12:28])
    q = np.frombuffer(raw[28:], ">f4").reshape(5, nk, nj, ni)
    with h5py.File(dst, "w") as f:
        g = f.create_group("plot3d")
        g.attrs.update({"mach": mach, "alpha": alpha, "re": re, "time": t, "source": src.name})
        g.create_dataset("dims", data=np.array([ni, nj, nk], dtype=">i4"))
        g.create_dataset("q", data=q)
        f["q_link"] = h5py.SoftLink("/plot3d/q")


def _inputs(tmp_path_factory):
    out = []
    if not DATA_DIR.is_dir():
        return out
    for p in sorted(DATA_DIR.iterdir()):
        if p.suffix in (".h5", ".nc", ".bin"):
            out.append(p.name)
    return out


@pytest.fixture
def as_hdf5(tmp_path):
    """Any data file as an HDF5 file: HDF5 and netCDF-4 as they are, netCDF-3 through nccopy -k nc4, PLOT3D
    wrapped by _plot3d_to_h5."""
    def convert(name):
        src = DATA_DIR / name
        if name.endswith(".bin"):
            dst = tmp_path / (name + ".h5")
            _plot3d_to_h5(src, dst)
            return dst
        if h5py.is_hdf5(src):
            return src
        need_tool("nccopy")
        dst = tmp_path / ("nc4_" + name)
        run(["nccopy", "-k", "nc4", src, dst])
        return dst
    return convert


def _attrs(obj):
    out = {}
    for k in obj.attrs:
        if k in SKIP_ATTRS:
            continue
        aid = obj.attrs.get_id(k)
        v = obj.attrs[k]
        out[k] = (aid.dtype, aid.shape, repr(v.tolist()) if isinstance(v, np.ndarray) and v.dtype.hasobject
                  else (np.asarray(v).tobytes() if not isinstance(v, (str, bytes)) else v))
    return out


def _is_scale(ds):
    c = ds.attrs.get("CLASS")
    return isinstance(c, (bytes, np.bytes_)) and bytes(c).rstrip(b"\0") == b"DIMENSION_SCALE"


def _fill(ds):
    pl = ds.id.get_create_plist()
    return ds.fillvalue if pl.fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED else None


def check_repacked(src, dst, eb, include=None):
    """Independent check of a repacked file: the same objects; float datasets (not scales) within eb and carrying
    zbound; every other dataset, every attribute, every group identical."""
    nfloat = 0
    with h5py.File(src, "r") as a, h5py.File(dst, "r") as b:
        na, nb = [], []
        a.visit(na.append)
        b.visit(nb.append)
        assert sorted(na) == sorted(nb)
        assert _attrs(a) == _attrs(b)
        for name in na:
            la, lb = a.get(name, getlink=True), b.get(name, getlink=True)
            assert type(la) is type(lb), name
            if isinstance(la, h5py.SoftLink):
                assert la.path == lb.path
                continue
            x, y = a[name], b[name]
            assert type(x) is type(y), name
            assert _attrs(x) == _attrs(y), name
            if not isinstance(x, h5py.Dataset):
                continue
            assert x.dtype == y.dtype and x.shape == y.shape and x.maxshape == y.maxshape, name
            if "DIMENSION_LIST" in x.attrs:
                assert [[s.name for s in d.values()] for d in x.dims] == \
                       [[s.name for s in d.values()] for d in y.dims], name
            lossy = (x.dtype.kind == "f" and x.dtype.itemsize in (4, 8) and x.ndim >= 1 and x.size > 0
                     and not _is_scale(x) and (include is None or any(name.startswith(i) for i in include)))
            if lossy:
                assert 33000 in filters_of(y), name
                fx, fy = _fill(x), _fill(y)
                assert (fx is None) == (fy is None), name
                assert fx is None or np.array([fx], x.dtype).tobytes() == np.array([fy], x.dtype).tobytes(), name
                assert_within(x[...], y[...], eb, fill=_fill(x), what=name)
                nfloat += 1
            else:
                assert 33000 not in filters_of(y), name
                assert filters_of(x) == filters_of(y) and x.chunks == y.chunks, name
                xv, yv = x[()], y[()]
                if isinstance(xv, np.ndarray) and not xv.dtype.hasobject:
                    assert xv.tobytes() == yv.tobytes(), name
                else:
                    assert repr(np.asarray(xv).tolist()) == repr(np.asarray(yv).tolist()), name
    return nfloat


@pytest.mark.parametrize("name", _inputs(None))
def test_repack_and_verify_every_data_file(tmp_path, as_hdf5, name):
    src = as_hdf5(name)
    dst = tmp_path / "out.h5"
    p = zb_cli("h5", "repack", src, dst, "--abs", repr(EB), "--json", tmp_path / "r.json")
    assert p.stderr == ""  # not a terminal: no progress bar
    nfloat = check_repacked(src, dst, EB)
    assert nfloat >= 1
    assert f"{nfloat} datasets" in p.stdout
    v = zb_cli("h5", "verify", src, dst)
    assert "verify: ok" in v.stdout and v.stderr == ""
    if name.endswith(".nc"):
        # netCDF-C still opens the file as netCDF-4 and reads every variable through the plugin
        need_tool("ncdump")
        p = subprocess.run(["ncdump", str(dst)], env=pkg_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr


def test_repack_rel_with_include(tmp_path):
    src = DATA_DIR / "gpm_2a_ku_volume.h5"
    dst = tmp_path / "gpm_rel.h5"
    rel = 1e-3
    zb_cli("h5", "repack", src, dst, "--rel", repr(rel), "--include", "/NS/SLV/*", "-q")
    with h5py.File(src, "r") as a, h5py.File(dst, "r") as b:
        da, db = h5_datasets(a), h5_datasets(b)
        changed = [p for p in db if 33000 in filters_of(db[p])]
        assert changed and all(p.startswith("/NS/SLV/") for p in changed)
        for p in changed:
            x, y = da[p][...], db[p][...]
            fill = _fill(da[p])
            ok = np.isfinite(x) & (x != fill if fill is not None else True)
            whole = rel * (float(x[ok].max()) - float(x[ok].min()))  # in double, as the codec
            ds = db[p]
            for idx in np.ndindex(*[-(-s // c) for s, c in zip(ds.shape, ds.chunks)]):
                off = tuple(i * c for i, c in zip(idx, ds.chunks))
                sl = tuple(slice(o, o + c) for o, c in zip(off, ds.chunks))
                mask, raw = ds.id.read_direct_chunk(off)
                eb = struct.unpack_from("<d", raw, 24)[0]
                assert mask == 0 and eb <= whole * (1 + 1e-12), (p, off)   # a chunk's range is within the whole
                assert_within(x[sl], y[sl], eb, fill=fill, what=f"{p} chunk {off}")
    zb_cli("h5", "verify", src, dst, "-q")


@pytest.fixture(scope="module")
def repacked_gpm(tmp_path_factory):
    src = DATA_DIR / "gpm_2a_ku_volume.h5"
    dst = tmp_path_factory.mktemp("gpm") / "gpm.h5"
    zb_cli("h5", "repack", src, dst, "--abs", repr(EB), "-q")
    return src, dst


@pytest.mark.parametrize("change", ["float value", "int value", "attribute", "removed dataset"])
def test_verify_catches_changes(tmp_path, repacked_gpm, change):
    src, dst = repacked_gpm
    bad = tmp_path / "bad.h5"
    shutil.copy(dst, bad)
    with h5py.File(bad, "r+") as f:
        if change == "float value":
            target = "/NS/SLV/precipRate"
            v = f[target][...]
            i = np.unravel_index(np.argmax(v), v.shape)
            v[i] += 10 * EB
            f[target][...] = v
        elif change == "int value":
            target = "/NS/CSF/flagBB"
            v = f[target][...]
            v[3, 4] += 1
            f[target][...] = v
        elif change == "attribute":
            target = "/NS/SLV/zFactorCorrected"
            f[target].attrs["Units"] = "changed"
        else:
            target = "/NS/Latitude"
            del f[target]
    p = zb_cli("h5", "verify", src, bad, check=False)
    assert p.returncode == 3, p.stdout + p.stderr
    assert target in p.stdout and "VIOLATION" in p.stdout


def test_errors_name_the_dataset(tmp_path, repacked_gpm):
    src, dst = repacked_gpm
    target = "/NS/SLV/precipRate"
    for path, cmd in ((src, "repack"), (dst, "verify")):
        broken = tmp_path / f"broken_{cmd}.h5"
        shutil.copy(path, broken)
        with h5py.File(broken, "r") as f:
            info = f[target].id.get_chunk_info(0)
        with open(broken, "r+b") as fh:  # garbage over the middle of one stored chunk
            fh.seek(info.byte_offset + info.size // 4)
            fh.write(os.urandom(max(info.size // 2, 8)))
        if cmd == "repack":
            p = zb_cli("h5", "repack", broken, tmp_path / "o.h5", "--abs", "0.1", check=False)
            assert p.returncode == 1, p.stdout + p.stderr
            assert target in p.stderr and "error" in p.stderr
        else:
            p = zb_cli("h5", "verify", src, broken, check=False)
            assert p.returncode != 0
            assert target in p.stdout + p.stderr


def _run_on_pty(cmd, env):
    """Runs cmd with stderr on a pseudo-terminal and stdout on a pipe; returns (exit code, stdout, terminal text)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif p.poll() is not None:
            break
    out = p.stdout.read().decode()
    p.wait(timeout=120)
    os.close(master)
    return p.returncode, out, b"".join(chunks).decode(errors="replace")


def test_progress_bar_on_a_terminal_only(tmp_path):
    src = DATA_DIR / "radar_rainsum_f64.h5"
    rc, out, term = _run_on_pty([PY_CLI, "h5", "repack", src, tmp_path / "t.h5", "--abs", "0.1"], pkg_env())
    assert rc == 0, out + term
    assert "\r" in term and "ETA" in term and "/s" in term and "%" in term, term[-500:]
    assert "MB" in term and "\r" not in out     # the bar goes to the terminal, the report to stdout
    assert "/data" in out
    rc, out, term = _run_on_pty([PY_CLI, "h5", "verify", src, tmp_path / "t.h5"], pkg_env())
    assert rc == 0 and "ETA" in term and "verify: ok" in out
    # not a terminal: silent (stderr empty), also with --progress forced off on a terminal
    p = zb_cli("h5", "repack", src, tmp_path / "u.h5", "--abs", "0.1")
    assert p.stderr == "" and "\r" not in p.stdout
    rc, out, term = _run_on_pty([PY_CLI, "h5", "repack", src, tmp_path / "v.h5", "--abs", "0.1", "--no-progress"],
                                pkg_env())
    assert rc == 0 and "ETA" not in term


def test_usage_errors():
    p = zb_cli("h5", "repack", "a.h5", "b.h5", check=False)
    assert p.returncode == 2 and "--abs" in p.stderr
    p = zb_cli("h5", "repack", "/nonexistent.h5", "b.h5", "--abs", "1", check=False)
    assert p.returncode == 1 and "/nonexistent.h5" in p.stderr
    # pw_rel repacks and verifies every value against pw * |x| (the stream header's bound is on log2 |x|).
    p = zb_cli("h5", "repack", DATA_DIR / "radar_rainsum_f64.h5", "/tmp/x.h5", "--pw-rel", "1e-3", check=False)
    assert p.returncode == 0, p.stderr


def test_cpp_cli_forwards_h5_and_report(tmp_path, repacked_gpm):
    """The C++ `zbound` (bundled in the package, and the build tree's) hands `h5` and `report` to the package."""
    src, dst = repacked_gpm
    clis = [BUNDLED_CLI] + ([str(BUILD_DIR / "bin" / "zbound")] if (BUILD_DIR / "bin" / "zbound").exists() else [])
    for cli in clis:
        p = run([cli, "h5", "verify", src, dst, "-q"], env=pkg_env())
        assert p.returncode == 0 and "verify: ok" not in p.stdout   # -q: problems only
        p = run([cli, "--help"])
        assert "h5" in p.stdout and "report" in p.stdout
        p = run([cli, "h5", "verify", src, dst], env=pkg_env(ZBOUND_PYTHON=tmp_path / "no-python"), check=False)
        assert p.returncode == 1 and "ZBOUND_PYTHON" in p.stderr and "pip install" in p.stderr
        base = getattr(sys, "_base_executable", None)
        if base and os.path.realpath(base) != os.path.realpath(sys.executable) and \
                subprocess.run([base, "-c", "import zbound"], capture_output=True).returncode != 0:
            p = run([cli, "report", "x.h5"], env=pkg_env(ZBOUND_PYTHON=base), check=False)
            assert p.returncode == 1 and "cannot import" in p.stderr and "pip install" in p.stderr
    # and the package's console script hands the other commands to the bundled C++ tool
    assert zb_cli("--version").stdout.startswith("zbound ")
    p = run([sys.executable, "-m", "zbound", "cdvalues", "--abs", "1e-3", "--format", "words"])
    assert p.stdout.strip() == ",".join(map(str, zbound.cd_values("abs", 1e-3)))
