"""`zbound report`: pictures of what the compression does to a field (PNG, matplotlib).

1. Rate-distortion: PSNR against bits per value over a sweep of bounds (relative to the field's finite value
   range), for zbound (absolute bound over the whole array; relative bound per HDF5 chunk) beside SZ3 and ZFP from
   hdf5plugin (SZ3 absolute mode, ZFP accuracy mode, the same absolute bounds, the whole field as one chunk).
   The peers run in child processes: one that crashes (hdf5plugin's SZ3 does on some fields) is reported and the
   sweep goes on. A point whose reconstruction breaks the bound is drawn hollow.
2. Error map: one 2D slice of the field, its reconstruction and the error (reconstruction - original) with color
   bars; NaN and fill values in gray.

PSNR = 20 log10(range) - 10 log10(MSE) over the finite, non-fill values; bits per value = 8 * stored bytes / values.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

DEFAULT_RELS = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5)
PEERS = ("sz3", "zfp")


# ---------------------------------------------------------------- input

def load_field(path, dataset=None):
    """(array, fill value or None, name). .npy files, HDF5 / netCDF-4 through h5py, netCDF-3 through netCDF4 when
    installed. Without `dataset`, the largest float dataset that is not a dimension scale."""
    path = os.fspath(path)
    if path.endswith(".npy"):
        return np.load(path), None, os.path.basename(path)
    import h5py
    from . import h5tools
    if h5py.is_hdf5(path):
        with h5py.File(path, "r") as f:
            if dataset is None:
                found = []
                f.visititems(lambda n, o: found.append(o) if isinstance(o, h5py.Dataset) and o.dtype.kind == "f"
                             and o.shape and not h5tools._is_scale(o) else None)
                if not found:
                    raise ValueError(f"{path}: no float dataset")
                ds = max(found, key=lambda o: o.size)
            else:
                if dataset not in f:
                    raise ValueError(f"{path}: no dataset {dataset!r}")
                ds = f[dataset]
            a = ds[...]
            fill = None
            pl = ds.id.get_create_plist()
            if pl.fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED:
                fill = ds.fillvalue
            return a, fill, ds.name
    try:
        import netCDF4
    except ImportError as e:
        raise ValueError(f"{path}: not HDF5; for netCDF-3 install netCDF4 or convert: nccopy -k nc4 IN OUT") from e
    with netCDF4.Dataset(path) as d:
        names = [v for v in d.variables if d.variables[v].dtype.kind == "f" and d.variables[v].ndim >= 1
                 and v not in d.dimensions]
        if dataset is None:
            if not names:
                raise ValueError(f"{path}: no float variable")
            dataset = max(names, key=lambda v: d.variables[v].size)
        v = d.variables[dataset.lstrip("/")]
        v.set_auto_maskandscale(False)
        fill = getattr(v, "_FillValue", None)
        return np.asarray(v[...]), fill, dataset


def _valid_mask(a, fill):
    ok = np.isfinite(a)
    if fill is not None:
        ok &= a != np.asarray(fill, dtype=a.dtype)
    return ok


def measure(orig, rec, ok, eb, stored_bytes):
    """bits/value, PSNR, max err / eb over the valid values."""
    o = orig[ok].astype(np.float64)
    r = rec[ok].astype(np.float64)
    err = np.abs(o - r)
    rng = float(o.max() - o.min()) if o.size else 0.0
    if not np.isfinite(err).all():
        mse, maxe = math.inf, math.inf
    else:
        mse = float(np.mean(err * err)) if err.size else 0.0
        maxe = float(err.max()) if err.size else 0.0
    psnr = math.inf if mse == 0 else (-math.inf if not math.isfinite(mse) or rng <= 0 else
                                      20 * math.log10(rng) - 10 * math.log10(mse))
    return {"bits": 8.0 * stored_bytes / orig.size, "psnr": psnr, "ratio": orig.nbytes / stored_bytes,
            "max_err_over_eb": maxe / eb if eb > 0 else (0.0 if maxe == 0 else math.inf),
            "within": bool(maxe <= eb)}


# ---------------------------------------------------------------- tools

def _zbound_abs(a, eb, fill):
    from ._api import compress, decompress
    b = compress(a, abs=eb, fill=fill)
    return decompress(b, shape=a.shape), len(b)


def _h5_roundtrip(a, filt, chunks):
    """Writes `a` through an HDF5 filter into an in-memory file and reads it back: (reconstruction, stored bytes)."""
    import h5py
    # chunk cache off: the values read back come from the stored (compressed) chunks, not from the cache
    with h5py.File(f"mem-{os.getpid()}-{id(a)}.h5", "w", driver="core", backing_store=False, rdcc_nbytes=0) as f:
        ds = f.create_dataset("x", data=a, chunks=chunks, **filt)
        f.flush()
        rec = ds[...]
        return rec, ds.id.get_storage_size()


def _zbound_rel_chunked(a, rel, fill, chunks):
    from ._filter import Filter
    import h5py
    from . import _h5
    if not h5py.h5z.filter_avail(33000):
        _h5.register_h5py()
    rec, size = _h5_roundtrip(a, dict(Filter(rel=rel)), chunks)
    return rec, size


def _peer_worker(spec_json):
    """Child process: one peer over a list of bounds; one JSON line per bound, flushed as soon as it is known."""
    spec = json.loads(spec_json)
    import hdf5plugin
    a = np.load(spec["npy"])
    ok = _valid_mask(a, spec.get("fill"))
    for eb in spec["ebs"]:
        filt = dict(hdf5plugin.SZ3(absolute=eb)) if spec["tool"] == "sz3" else dict(hdf5plugin.Zfp(accuracy=eb))
        rec, size = _h5_roundtrip(a, filt, a.shape)
        r = measure(a, rec, ok, eb, size)
        r["eb"] = eb
        print(json.dumps(r), flush=True)


def _run_peer(tool, npy, ebs, fill, log):
    """Results of one peer for every bound, running the sweep in child processes; a bound that crashes its child
    gets an error entry and the sweep continues in a new child."""
    results = {}
    todo = list(ebs)
    while todo:
        spec = json.dumps({"tool": tool, "npy": npy, "ebs": todo, "fill": None if fill is None else float(fill)})
        p = subprocess.run([sys.executable, "-m", "zbound.report", "--peer-worker", spec], capture_output=True,
                           text=True, timeout=600)
        for line in p.stdout.splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            results[r["eb"]] = r
        todo = [eb for eb in todo if eb not in results]
        if p.returncode != 0 or todo:
            if not todo:
                break
            why = f"crashed (signal {-p.returncode})" if p.returncode < 0 else f"failed (exit {p.returncode})"
            if "No module named 'hdf5plugin'" in p.stderr:
                log(f"report: {tool}: hdf5plugin is not installed; skipped")
                for eb in todo:
                    results[eb] = {"eb": eb, "error": "hdf5plugin not installed"}
                break
            log(f"report: {tool} {why} at abs bound {todo[0]:.3g}; going on without that point")
            results[todo[0]] = {"eb": todo[0], "error": why}
            todo = todo[1:]
    return [results[eb] for eb in ebs]


# ---------------------------------------------------------------- pictures

def _slice2d(a):
    """A 2D slice: the last two dims at the middle index of every leading dim (1D: one row)."""
    if a.ndim == 1:
        return a[None, :], "1D field"
    idx = tuple(s // 2 for s in a.shape[:-2])
    label = "slice [" + ", ".join(str(i) for i in idx) + ", :, :]" if idx else "2D field"
    return a[idx], label


def even_chunks(shape, itemsize, target=1 << 20):
    """HDF5 chunks of about `target` bytes that tile the array exactly (whole trailing dims, a divisor of the
    leading one), so that no chunk is padded: HDF5 pads partial chunks with the fill value, and that padding
    takes part in a chunk's rel range."""
    chunks = list(shape)
    for ax in range(len(shape)):
        rest = int(np.prod(shape[ax + 1:], dtype=np.int64)) * itemsize
        if rest >= target and ax < len(shape) - 1:
            chunks[ax] = 1
            continue
        limit = max(1, target // max(rest, 1))
        best = max(d for d in range(1, min(shape[ax], limit) + 1) if shape[ax] % d == 0)
        # no divisor near the target (a prime length): accept one padded chunk rather than tiny chunks
        chunks[ax] = best if best * 8 >= min(limit, shape[ax]) else min(limit, shape[ax])
        break
    return tuple(int(c) for c in chunks)


def rate_distortion(a, fill=None, rels=DEFAULT_RELS, peers=PEERS, chunks=None, log=print):
    """The sweep as a dict of tool -> list of points (rel, eb, bits, psnr, ratio, max_err_over_eb, within)."""
    ok = _valid_mask(a, fill)
    vals = a[ok]
    if vals.size == 0:
        raise ValueError("the field has no finite values")
    rng = float(vals.max()) - float(vals.min())
    if rng <= 0:
        raise ValueError("the field is constant: nothing to plot")
    if chunks is None:
        chunks = even_chunks(a.shape, a.dtype.itemsize)
    curves = {"zbound abs": [], f"zbound rel (per chunk {'x'.join(map(str, chunks))})": []}
    rel_key = list(curves)[1]
    for rel in rels:
        eb = rel * rng
        rec, size = _zbound_abs(a, eb, fill)
        curves["zbound abs"].append({"rel": rel, "eb": eb, **measure(a, rec, ok, eb, size)})
        rec, size = _zbound_rel_chunked(a, rel, fill, chunks)
        # the per-chunk bound is at most rel * (global range): the check uses the global one
        curves[rel_key].append({"rel": rel, "eb": eb, **measure(a, rec, ok, eb, size)})
    if peers:
        with tempfile.TemporaryDirectory(prefix="zbound-report-") as tmp:
            npy = os.path.join(tmp, "field.npy")
            np.save(npy, np.ascontiguousarray(a))
            ebs = [rel * rng for rel in rels]
            for tool in peers:
                pts = _run_peer(tool, npy, ebs, fill, log)
                curves[{"sz3": "SZ3 (hdf5plugin)", "zfp": "ZFP accuracy (hdf5plugin)"}[tool]] = [
                    {"rel": rel, **p} for rel, p in zip(rels, pts)]
    return {"range": rng, "values": int(vals.size), "chunks": list(chunks), "curves": curves}


def plot_rate_distortion(rd, title, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.2), dpi=110)
    styles = {"zbound abs": ("C0", "o"), "SZ3 (hdf5plugin)": ("C2", "s"), "ZFP accuracy (hdf5plugin)": ("C3", "^")}
    for name, pts in rd["curves"].items():
        color, marker = styles.get(name, ("C1", "D"))
        good = [p for p in pts if "error" not in p and math.isfinite(p["psnr"])]
        if not good:
            continue
        ax.plot([p["bits"] for p in good], [p["psnr"] for p in good], color=color, marker=marker, label=name,
                markersize=5, linewidth=1.5)
        bad = [p for p in good if not p["within"]]
        if bad:
            ax.plot([p["bits"] for p in bad], [p["psnr"] for p in bad], linestyle="none", marker=marker,
                    markersize=9, markerfacecolor="white", markeredgecolor=color)
        failed = [p for p in pts if "error" in p]
        for p in failed:
            ax.annotate(f"{name.split()[0]} {p['error']} at rel {p['rel']:g}", xy=(0.02, 0.02 + 0.05 * failed.index(p)),
                        xycoords="axes fraction", fontsize=7, color=color)
    ax.set_xlabel("bits per value")
    ax.set_ylabel("PSNR (dB)")
    ax.set_xscale("log", base=2)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    ax.text(0.01, 0.99, "hollow marker: bound broken somewhere", transform=ax.transAxes, fontsize=7, va="top",
            color="0.4")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_error_map(a, fill, rel, title, path):
    """Original, reconstruction (zbound abs, eb = rel * range) and error of one 2D slice. Returns the numbers
    shown in the title."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = _valid_mask(a, fill)
    vals = a[ok]
    rng = float(vals.max()) - float(vals.min())
    eb = rel * rng
    rec, size = _zbound_abs(a, eb, fill)
    s_orig, label = _slice2d(a)
    s_rec, _ = _slice2d(rec)
    s_ok, _ = _slice2d(ok)
    err = np.where(s_ok, s_rec.astype(np.float64) - s_orig.astype(np.float64), np.nan)
    show_o = np.where(s_ok, s_orig, np.nan)
    show_r = np.where(s_ok, s_rec, np.nan)
    lo, hi = float(np.nanmin(show_o)), float(np.nanmax(show_o))
    maxe = float(np.nanmax(np.abs(err))) if np.isfinite(err).any() else 0.0

    h, w = s_orig.shape
    aspect = w / max(h, 1)
    fig_w = 15.0
    fig, axes = plt.subplots(1, 3, figsize=(fig_w, max(2.8, fig_w / 3 / aspect + 1.2)), dpi=100)
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.75")
    ecmap = plt.get_cmap("RdBu_r").with_extremes(bad="0.75")
    for ax, img, t, cm, vmin, vmax in (
            (axes[0], show_o, "original", cmap, lo, hi),
            (axes[1], show_r, "reconstruction", cmap, lo, hi),
            (axes[2], err, f"error (max |err| = {maxe:.3g}, bound {eb:.3g})", ecmap, -eb, eb)):
        im = ax.imshow(img, cmap=cm, vmin=vmin, vmax=vmax, origin="lower" if h > 1 else "upper",
                       aspect="auto", interpolation="nearest")
        ax.set_title(t, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02)
    fig.suptitle(f"{title}, {label}: zbound abs {eb:.3g} (rel {rel:g}), ratio {a.nbytes / size:.1f}",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return {"eb": eb, "ratio": a.nbytes / size, "max_err": maxe, "slice": label}


def report(path, dataset=None, out_dir=".", prefix=None, rels=DEFAULT_RELS, peers=PEERS, map_rel=1e-2,
           log=print):
    """Writes <prefix>_rd.png, <prefix>_errmap.png and <prefix>_rd.json into out_dir; returns their paths and
    the numbers."""
    a, fill, name = load_field(path, dataset)
    if a.dtype.kind != "f" or a.dtype.itemsize not in (4, 8):
        raise ValueError(f"{name}: zbound takes float32/float64, not {a.dtype}")
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
    os.makedirs(out_dir, exist_ok=True)
    if prefix is None:
        prefix = os.path.splitext(os.path.basename(os.fspath(path)))[0] + "_" + name.strip("/").replace("/", "_")
    rd = rate_distortion(a, fill, rels, peers, log=log)
    field = f"{os.path.basename(os.fspath(path))}:{name} {'x'.join(map(str, a.shape))} {a.dtype}"
    rd_png = os.path.join(out_dir, prefix + "_rd.png")
    plot_rate_distortion(rd, f"rate-distortion, {field}", rd_png)
    map_png = os.path.join(out_dir, prefix + "_errmap.png")
    em = plot_error_map(a, fill, map_rel, field, map_png)
    rd_json = os.path.join(out_dir, prefix + "_rd.json")
    with open(rd_json, "w") as f:
        json.dump({"field": field, "rate_distortion": rd, "error_map": em}, f, indent=1,
                  default=lambda x: None)
    return {"rd_png": rd_png, "errmap_png": map_png, "json": rd_json, "rd": rd, "error_map": em}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--peer-worker":
        _peer_worker(sys.argv[2])
    else:
        sys.exit("usage: python -m zbound report ...  (this module's own entry is the peer worker)")
