"""zbound as a numcodecs codec and a Zarr v3 codec; Zarr v2 and v3 arrays; Dask writing and reading them in
parallel on a local cluster (loopback)."""
import json
import warnings

import numpy as np
import pytest

from test_pkg_common import DATA_DIR, assert_within, pkg_env, python, smooth, zbound

numcodecs = pytest.importorskip("numcodecs")
zarr = pytest.importorskip("zarr")


def test_numcodecs_registry_and_config_round_trip():
    from numcodecs.registry import get_codec
    c = get_codec({"id": "zbound", "abs": 0.05})
    assert isinstance(c, zbound.Zbound)
    again = get_codec(c.get_config())
    assert again.get_config() == c.get_config()
    a = smooth((33, 44, 5), "f8")
    enc = c.encode(a)
    dec = c.decode(enc)
    assert_within(a.reshape(-1), dec, 0.05)
    out = np.empty(a.size, dtype=a.dtype)
    c.decode(enc, out=out)
    assert_within(a.reshape(-1), out, 0.05)
    with pytest.raises(TypeError, match="float32/float64"):
        c.encode(np.arange(100, dtype=np.int32))


def test_numcodecs_codec_found_without_import(tmp_path):
    """The entry point makes numcodecs.get_codec find the codec in a process that never imported zbound."""
    code = """
import numpy as np, numcodecs, sys
c = numcodecs.get_codec({'id': 'zbound', 'rel': 1e-3})
a = np.linspace(0, 10, 5000, dtype='f4')
assert np.abs(c.decode(c.encode(a)) - a).max() <= 1e-2 + 1e-6
print(type(c).__module__)
"""
    p = python(code, env=pkg_env())
    assert p.stdout.strip().startswith("zbound")


def _real_field():
    import h5py
    with h5py.File(DATA_DIR / "gmt_geoid_1m.nc", "r") as f:
        return f["z"][...]


@pytest.mark.parametrize("fmt", [2, 3])
def test_zarr_array_round_trip(tmp_path, fmt):
    a = _real_field()
    eb = 1e-3
    store = tmp_path / f"geoid_v{fmt}.zarr"
    kw = ({"compressors": zbound.Zbound(abs=eb)} if fmt == 2 else
          {"serializer": zbound.ZboundCodec(abs=eb), "compressors": None})
    z = zarr.create_array(store=str(store), shape=a.shape, chunks=(100, 128), dtype=a.dtype, zarr_format=fmt, **kw)
    z[:] = a
    meta = (store / ".zarray") if fmt == 2 else (store / "zarr.json")
    text = meta.read_text()
    assert '"zbound"' in text
    stored = sum(p.stat().st_size for p in store.rglob("*") if p.is_file() and p.name not in
                 (".zarray", ".zattrs", "zarr.json"))
    assert stored < a.nbytes / 2
    # a fresh process that never imports zbound opens it (entry points for numcodecs and zarr)
    code = f"""
import numpy as np, zarr, sys
np.save(sys.argv[1], zarr.open_array({str(store)!r}, mode='r')[...])
"""
    python(code, str(tmp_path / "back.npy"), env=pkg_env())
    assert_within(a, np.load(tmp_path / "back.npy"), eb)


def test_zarr_v3_codec_metadata_round_trip():
    c = zbound.ZboundCodec(rel=1e-4, predictor="lorenzo", encoder="fast")
    d = c.to_dict()
    assert d["name"] == "zbound"
    assert type(c).from_dict(d) == c
    json.dumps(d)


def test_zarr_rejects_non_float(tmp_path):
    with pytest.raises(TypeError, match="float32/float64"):
        zarr.create_array(store=str(tmp_path / "i.zarr"), shape=(10,), chunks=(5,), dtype="i4",
                          serializer=zbound.ZboundCodec(abs=1), compressors=None)


@pytest.fixture(scope="module")
def dask_client():
    pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # threads in this process, talking TCP on the loopback address (no other address is used)
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False, protocol="tcp://",
                                           host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster, timeout=30)
    yield client
    client.close(timeout=30)
    cluster.close(timeout=30)


@pytest.mark.parametrize("fmt", [2, 3])
def test_dask_writes_and_reads_zarr_in_parallel(tmp_path, dask_client, fmt):
    """Dask computes the chunks on the cluster's workers, each compressed there with zbound; reading back goes
    through the workers too."""
    import dask.array as da
    from distributed import wait
    rng = np.random.default_rng(7)
    base = np.cumsum(rng.normal(size=(400, 360)), axis=0).astype(np.float32)
    x = da.from_array(base, chunks=(100, 90)) * 2.0 + 1.0
    expected = base * np.float32(2.0) + np.float32(1.0)
    eb = 1e-2
    store = str(tmp_path / f"dask_v{fmt}.zarr")
    kw = ({"compressors": zbound.Zbound(abs=eb)} if fmt == 2 else
          {"serializer": zbound.ZboundCodec(abs=eb), "compressors": None})
    z = zarr.create_array(store=store, shape=x.shape, chunks=(100, 90), dtype=x.dtype, zarr_format=fmt, **kw)
    fut = da.store(x, z, lock=False, compute=False)
    fut = dask_client.compute(fut)
    wait(fut, timeout=60)
    fut.result()
    y = da.from_zarr(store)
    assert y.chunks == ((100,) * 4, (90,) * 4)
    back = dask_client.compute(y).result(timeout=60)
    assert_within(expected, back, eb)
    workers = dask_client.scheduler_info()["workers"]
    assert len(workers) == 2 and all(w.startswith("tcp://127.0.0.1:") for w in workers)
