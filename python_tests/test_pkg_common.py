"""Helpers shared by the Python package tests (test_pkg_*.py); no tests here.

The package tests need the installed `zbound` package (scripts/test.sh installs it into a fresh venv with
`pip install .` and runs them there). Where the package is not installed they are skipped with that reason.
Every check is a property (every value within its bound, everything else identical), never a number that the code
under test printed.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

zbound = pytest.importorskip(
    "zbound", reason="the zbound Python package is not installed in this interpreter "
                     "(scripts/test.sh runs these tests in a fresh venv after `pip install .`)")

from conftest import DATA_DIR, REPO_ROOT, assert_within, exact_mask, uint_view  # noqa: E402,F401

VENV_BIN = Path(sys.executable).parent
PY_CLI = str(VENV_BIN / "zbound") if (VENV_BIN / "zbound").exists() else None  # the console script
BUNDLED_CLI = str(Path(zbound.__file__).parent / "bin" / "zbound")              # the C++ tool in the package


def pkg_env(plugin_path=True, **extra):
    """Environment for a child process: HDF5_PLUGIN_PATH at the package's plugin (or unset), the venv first on
    PATH (so `python3` and `zbound` are the venv's)."""
    env = dict(os.environ)
    env.pop("HDF5_PLUGIN_PATH", None)
    env.pop("ZBOUND_HDF5_LIBRARY", None)
    if plugin_path:
        env["HDF5_PLUGIN_PATH"] = zbound.PLUGIN_PATH
    env["PATH"] = str(VENV_BIN) + os.pathsep + env.get("PATH", "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd, env=None, timeout=300, check=True, **kw):
    p = subprocess.run([str(c) for c in cmd], env=env if env is not None else pkg_env(), capture_output=True,
                       text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} -> exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def zb_cli(*args, **kw):
    """The package's `zbound` command (console script)."""
    assert PY_CLI, f"the zbound console script is not in {VENV_BIN}"
    return run([PY_CLI, *args], **kw)


def python(code, *args, **kw):
    return run([sys.executable, "-c", code, *args], **kw)


def need_tool(name):
    if shutil.which(name) is None:
        pytest.fail(f"{name} is not installed (bash scripts/setup.sh installs it)")
    return shutil.which(name)


def smooth(shape, dtype="f4", seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.float64)
    v = 20 * np.sin(i * 0.003) + 3 * np.cos(i * 0.00017) + rng.normal(scale=0.05, size=n)
    return v.reshape(shape).astype(dtype)


def h5_datasets(f):
    """{path: dataset} of every dataset in an open h5py file."""
    import h5py
    out = {}
    f.visititems(lambda n, o: out.__setitem__("/" + n, o) if isinstance(o, h5py.Dataset) else None)
    return out


def filters_of(ds):
    pl = ds.id.get_create_plist()
    return [pl.get_filter(i)[0] for i in range(pl.get_nfilters())]


def chunk_bounds(ds):
    """The absolute bound recorded in each stored chunk's zbound stream header (docs/FORMAT.md, offset 24)."""
    import struct
    out = {}
    for idx in np.ndindex(*[-(-s // c) for s, c in zip(ds.shape, ds.chunks)]):
        off = tuple(i * c for i, c in zip(idx, ds.chunks))
        mask, raw = ds.id.read_direct_chunk(off)
        assert mask == 0, f"{ds.name}: chunk {off} stored without the filter"
        assert raw[:4] == b"ZBND", f"{ds.name}: chunk {off} is not a zbound stream"
        out[off] = struct.unpack_from("<d", raw, 24)[0]
    return out
