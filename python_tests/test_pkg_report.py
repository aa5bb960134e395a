"""`zbound report`: the rate-distortion and error-map PNGs, with the peers (hdf5plugin SZ3, ZFP) run in child
processes so that a peer that crashes (SZ3 on gmt_sst at rel 1e-2) costs one point, not the report."""
import json
import math

import numpy as np
import pytest

from test_pkg_common import BUNDLED_CLI, DATA_DIR, pkg_env, run, zb_cli, zbound

pytest.importorskip("matplotlib")


def _png_shape(path):
    import matplotlib.image as mpimg
    head = path.read_bytes()[:8]
    assert head == b"\x89PNG\r\n\x1a\n", path
    return mpimg.imread(path).shape


def _check(out_dir, prefix, rels, peers):
    rd_png, map_png = out_dir / f"{prefix}_rd.png", out_dir / f"{prefix}_errmap.png"
    h, w, _ = _png_shape(rd_png)
    assert h >= 300 and w >= 400
    h2, w2, _ = _png_shape(map_png)
    assert w2 > 2 * h2 / 2 and w2 >= 900     # three panels side by side
    data = json.loads((out_dir / f"{prefix}_rd.json").read_text())
    curves = data["rate_distortion"]["curves"]
    zb = [k for k in curves if k.startswith("zbound")]
    assert len(zb) == 2
    for name in zb:
        pts = curves[name]
        assert [p["rel"] for p in pts] == rels
        # every zbound point holds its bound; bits per value fall and PSNR rises as the bound widens
        assert all(p["within"] and p["max_err_over_eb"] <= 1.0 for p in pts), name
        order = sorted(pts, key=lambda p: p["rel"])
        assert all(a["psnr"] >= b["psnr"] for a, b in zip(order, order[1:])), name
        assert order[0]["bits"] >= order[-1]["bits"], name
    for peer in peers:
        key = [k for k in curves if k.lower().startswith(peer)]
        assert len(key) == 1, curves.keys()
        for p in curves[key[0]]:
            assert "error" in p or (p["bits"] > 0 and math.isfinite(p["psnr"])), p
    em = data["error_map"]
    assert em["max_err"] <= em["eb"]
    return data


def test_report_on_a_real_field(tmp_path):
    rels = [1e-2, 1e-3, 1e-4]
    p = zb_cli("report", DATA_DIR / "cesm_trefht_b06_57.nc", "-o", tmp_path, "--prefix", "cesm",
               "--rel", ",".join(map(repr, rels)))
    assert "cesm_rd.png" in p.stdout and "cesm_errmap.png" in p.stdout
    _check(tmp_path, "cesm", rels, ["sz3", "zfp"])


def test_report_survives_a_crashing_peer(tmp_path):
    """hdf5plugin's SZ3 dies with SIGSEGV on gmt_sst (40% NaN) at rel 1e-2: that point is marked failed and the
    pictures are still written (if a later SZ3 no longer crashes, its point is simply there)."""
    p = run([BUNDLED_CLI, "report", DATA_DIR / "gmt_sst.nc", "-o", tmp_path, "--prefix", "sst", "--rel", "1e-2",
             "--peers", "sz3"], env=pkg_env())
    data = _check(tmp_path, "sst", [1e-2], ["sz3"])
    sz3 = [v for k, v in data["rate_distortion"]["curves"].items() if k.startswith("SZ3")][0][0]
    if "error" in sz3:
        assert "crashed" in sz3["error"] or "failed" in sz3["error"]
        assert "sz3" in p.stderr


def test_report_python_api_and_bad_input(tmp_path):
    from zbound import report
    a = np.cumsum(np.random.default_rng(2).normal(size=(64, 96)), axis=1).astype("f8")
    np.save(tmp_path / "walk.npy", a)
    out = report.report(tmp_path / "walk.npy", out_dir=tmp_path, prefix="walk", rels=(1e-2, 1e-3), peers=())
    assert out["rd_png"].endswith("walk_rd.png")
    _check(tmp_path, "walk", [1e-2, 1e-3], [])
    p = zb_cli("report", tmp_path / "missing.h5", check=False)
    assert p.returncode == 1 and "missing.h5" in p.stderr
    p = zb_cli("report", tmp_path / "walk.npy", "--peers", "bogus", check=False)
    assert p.returncode == 2 and "bogus" in p.stderr
