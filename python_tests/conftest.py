"""Shared setup of the Python tests: where the build, the plugin and the real data are, and small helpers.

The build directory is ZBOUND_BUILD_DIR (absolute, or relative to the repository root), by default `build/` in the
repository root. The plugin is loaded from <build>/plugin through HDF5_PLUGIN_PATH, which is set here before h5py
is imported, so that h5py's bundled HDF5 and every subprocess (h5repack, h5dump, the C example) find it.
The real data is ../shared/data relative to the repository root (read-only).
"""

import os
import struct
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
_build = Path(os.environ.get("ZBOUND_BUILD_DIR", "build"))
BUILD_DIR = _build if _build.is_absolute() else (REPO_ROOT / _build)
PLUGIN_DIR = BUILD_DIR / "plugin"
PLUGIN_FILE = PLUGIN_DIR / "libh5z_zbound.so"
DATA_DIR = (REPO_ROOT / ".." / "shared" / "data").resolve()

FILTER_ID = 33000  # ZBOUND_H5Z_FILTER in filter/zbound_filter.h
CD_MAX_WORDS = 13  # ZBOUND_CD_MAX_WORDS

os.environ["HDF5_PLUGIN_PATH"] = str(PLUGIN_DIR)

import h5py  # noqa: E402  (after HDF5_PLUGIN_PATH is set)

MODES = {"abs": 0, "rel": 1, "pw_rel": 2}


def pytest_configure(config):
    # In case h5py was imported (and HDF5 initialized) before this file set HDF5_PLUGIN_PATH.
    if str(PLUGIN_DIR).encode() not in [h5py.h5pl.get(i) for i in range(h5py.h5pl.size())]:
        h5py.h5pl.prepend(str(PLUGIN_DIR).encode())


@pytest.fixture(scope="session")
def require_plugin():
    """Used by every filter test module: a missing plugin is a failure, never a silent skip."""
    if not PLUGIN_FILE.exists():
        pytest.fail(
            f"zbound plugin not found at {PLUGIN_FILE}: build it first "
            f"(cmake -S . -B build && cmake --build build --target h5z_zbound) or set ZBOUND_BUILD_DIR"
        )
    return PLUGIN_FILE


def cd_values(mode="abs", bound=1e-3, predictor=0, encoder=0):
    """The six user cd_values words of the zbound filter (layout in filter/zbound_filter.h)."""
    bits = struct.unpack("<Q", struct.pack("<d", float(bound)))[0]
    return (1, MODES[mode], bits >> 32, bits & 0xFFFFFFFF, predictor, encoder)


def zbound_kwargs(mode="abs", bound=1e-3, **kw):
    """h5py create_dataset keyword arguments that apply the filter (h5py adds it as optional)."""
    return {"compression": FILTER_ID, "compression_opts": cd_values(mode, bound, **kw)}


def stream_abs_bound(raw):
    """The derived absolute bound stored in a chunk's zbound stream header (docs/FORMAT.md, offset 24)."""
    assert raw[:4] == b"ZBND", "chunk is not a zbound stream"
    return struct.unpack_from("<d", raw, 24)[0]


def edge_chunks(shape):
    """Chunk shape that leaves a partial chunk along every axis longer than 2."""
    chunks = []
    for d in shape:
        if d <= 2:
            chunks.append(max(d, 1))
            continue
        c = d // 3 + 1
        while c < d and d % c == 0:
            c += 1
        chunks.append(min(c, d))
    return tuple(chunks)


def uint_view(a):
    """Bit patterns of a float array in native byte order."""
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
    return a.view(np.uint64 if a.dtype.itemsize == 8 else np.uint32)


def exact_mask(a, fill):
    """Values the filter must return bit for bit: NaN, +-Inf, -0.0 and the fill value."""
    a = np.asarray(a)
    m = ~np.isfinite(a) | ((a == 0) & np.signbit(a))
    if fill is not None:
        fb = uint_view(np.array([fill], dtype=a.dtype))[0]
        m |= uint_view(a) == fb
    return m


def field_abs_bound(a, rel, fill):
    """rel times the range of the finite, non-fill values of the whole field (0 if there are none)."""
    a = np.asarray(a)
    ok = np.isfinite(a)  # -0.0 is returned exactly but is part of the range, like the codec counts it
    if fill is not None:
        ok &= uint_view(a) != uint_view(np.array([fill], dtype=a.dtype))[0]
    if not ok.any():
        return 0.0
    v = a[ok].astype(np.float64)
    return float(rel * (v.max() - v.min()))


def assert_within(orig, back, eb, fill=None, what=""):
    """Every value within eb of the original (in double); specials and the fill value bit-exact."""
    orig = np.asarray(orig)
    back = np.asarray(back)
    assert orig.shape == back.shape, what
    exact = exact_mask(orig, fill)
    bad = np.flatnonzero(((uint_view(orig) != uint_view(back)) & exact).ravel())
    assert bad.size == 0, f"{what}: {bad.size} NaN/Inf/-0/fill values changed, first at flat index {bad[0]}"
    keep = ~exact
    if keep.any():
        err = np.abs(orig[keep].astype(np.float64) - back[keep].astype(np.float64))
        worst = float(err.max())
        assert worst <= eb, f"{what}: max error {worst!r} > bound {eb!r}"


@pytest.fixture(scope="session")
def data_dir():
    if not DATA_DIR.is_dir():
        pytest.skip(f"real data not found at {DATA_DIR}")
    return DATA_DIR


@pytest.fixture(scope="session")
def build_dir():
    return BUILD_DIR


@pytest.fixture(scope="session")
def plugin_dir():
    return PLUGIN_DIR


@pytest.fixture
def tool_env():
    """Environment for subprocesses (h5repack, h5dump, the C example) that must find the plugin."""
    env = dict(os.environ)
    env["HDF5_PLUGIN_PATH"] = str(PLUGIN_DIR)
    return env
