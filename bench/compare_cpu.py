#!/usr/bin/env python3
"""zbound vs SZ3 and ZFP (hdf5plugin) on the CPU, one thread, on the real fields of ../shared/data.

Every tool gets the same absolute bound: eb = rel * (max - min) over the field's finite values, for each rel in
--rel. zbound is measured by its own driver (`zbound bench --json`, fast pipeline: lorenzo + fast encoder, CPU
backend, one thread); SZ3 (absolute mode) and ZFP (accuracy mode) through h5py into an in-memory HDF5 file (core
driver, chunk cache off, the whole field as one chunk), and, when the plugin is built, zbound through the same h5py
path. Each time is the median of --repeat runs after --warmup. Every reconstruction is checked on every value.
With --rounds R every tool is measured R times per field and bound, the tools in turn, and each speed is the median
of the rounds: on a shared machine a burst of load then falls on every tool alike instead of on whichever ran then.

    python3 bench/compare_cpu.py [--zbound build/bin/zbound] [--repeat 5] [--rounds 3] [--json bench/results/compare_cpu.json]
"""
import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# One thread everywhere, before any library that could start a thread pool is imported.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["ZBOUND_THREADS"] = "1"
os.environ["ZBOUND_BACKEND"] = "cpu"

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILTER_ID = 33000  # filter/zbound_filter.h (ZBOUND_H5Z_FILTER)


def load_fields(data_dir, names):
    """name -> (array, description). Real data only; shapes as stored (slowest first)."""
    out = {}
    if "cesm_trefht" in names:
        import netCDF4
        members = []
        for m in (57, 59, 60, 61):
            with netCDF4.Dataset(os.path.join(data_dir, f"cesm_trefht_b06_{m}.nc")) as d:
                v = d["TREFHT"]
                v.set_auto_mask(False)
                members.append(np.asarray(v[:], dtype=np.float32))
        out["cesm_trefht"] = (np.ascontiguousarray(np.concatenate(members)), "TREFHT members 57,59,60,61 stacked")
    import h5py
    if "gmt_sst" in names or "gmt_sst_nan0" in names:
        with h5py.File(os.path.join(data_dir, "gmt_sst.nc"), "r") as f:
            sst = np.ascontiguousarray(f["z"][...])
        if "gmt_sst" in names:
            out["gmt_sst"] = (sst, "SST with 40% NaN (land)")
        if "gmt_sst_nan0" in names:  # as in ANCHORS.md: the peers' bound breaks near NaN
            out["gmt_sst_nan0"] = (np.where(np.isnan(sst), np.float32(0), sst), "SST, NaN replaced by 0")
    if "gmt_geoid_1m" in names:
        with h5py.File(os.path.join(data_dir, "gmt_geoid_1m.nc"), "r") as f:
            out["gmt_geoid_1m"] = (np.ascontiguousarray(f["z"][...]), "geoid, 451x601")
    for var in ("T", "U", "V", "Z3"):
        if f"ncep_{var}" in names:
            import netCDF4
            with netCDF4.Dataset(os.path.join(data_dir, "ncep_06_climo.nc")) as d:
                v = d[var]
                v.set_auto_mask(False)
                out[f"ncep_{var}"] = (np.ascontiguousarray(np.asarray(v[:], dtype=np.float32)[0]),
                                      f"NCEP climatology {var}, 17x64x128")
    for q in ("combq", "postq"):
        if f"nasa_{q}" in names:
            raw = open(os.path.join(data_dir, f"nasa_cfd_{q}.bin"), "rb").read()
            ni, nj, nk = np.frombuffer(raw[:12], ">i4")
            arr = np.frombuffer(raw[28:], ">f4").reshape(5, nk, nj, ni).astype(np.float32)
            out[f"nasa_{q}"] = (np.ascontiguousarray(arr), f"PLOT3D {q}, 5 variables x {nk}x{nj}x{ni}")
    if "radar_rainsum_f64" in names:
        with h5py.File(os.path.join(data_dir, "radar_rainsum_f64.h5"), "r") as f:
            out["radar_rainsum_f64"] = (np.ascontiguousarray(f["data"][...]), "radar rain sum, f64")
    return out


def check_error(orig, rec, eb):
    """(max |x - x'| over finite x, violations) with specials (NaN, Inf) compared bit for bit."""
    fin = np.isfinite(orig)
    wide = np.longdouble
    d = np.abs(orig[fin].astype(wide) - rec[fin].astype(wide))
    bad_num = int(np.count_nonzero(~(d <= wide(eb))))  # a NaN reconstruction counts too
    maxe = float(np.nanmax(d)) if d.size else 0.0
    if d.size and np.isnan(d).any():
        maxe = float("inf")
    ui = np.uint64 if orig.dtype == np.float64 else np.uint32
    bad_special = int(np.count_nonzero(orig[~fin].view(ui) != rec[~fin].view(ui)))
    return maxe, bad_num + bad_special


def run_zbound_cli(zbound, raw_path, arr, eb, repeat, warmup, pipeline="lorenzo/fast"):
    dtype = "f64" if arr.dtype == np.float64 else "f32"
    dims = "x".join(str(s) for s in arr.shape)
    predictor, encoder = pipeline.split("/")
    cmd = [zbound, "bench", raw_path, "-t", dtype, "-d", dims, "--abs", repr(eb), "--predictor", predictor,
           "--encoder", encoder, "--backend", "cpu", "--threads", "1", "--repeat", str(repeat),
           "--warmup", str(warmup), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return {
        "tool": "zbound" if pipeline == "lorenzo/fast" else f"zbound:{pipeline}",
        "how": f"zbound bench --json ({pipeline}, cpu, 1 thread)",
        "ratio": r["ratio"], "compress_mbps": r["compress_gbps"] * 1e3, "decompress_mbps": r["decompress_gbps"] * 1e3,
        "max_err_over_eb": r["max_err_over_eb"], "violations": r["violations"] + r["special_mismatches"],
        "bytes_out": r["bytes_out"], "psnr": r["psnr"], "raw": r,
    }


def h5py_filter(tool, eb, zbound):
    import hdf5plugin
    if tool == "sz3":
        return dict(hdf5plugin.SZ3(absolute=eb))
    if tool == "zfp":
        return dict(hdf5plugin.Zfp(accuracy=eb))
    return {"compression": FILTER_ID, "compression_opts": zbound_cd_values(zbound, eb)}


def h5py_worker(spec):
    """Child process: write the field as one chunk through the filter into an in-memory HDF5 file (chunk cache
    off), read it back; median times. Peers run in a child so that a crash in one is reported, not fatal."""
    import h5py
    arr = np.fromfile(spec["raw"], dtype=spec["dtype"]).reshape(spec["shape"])
    eb, tool = spec["eb"], spec["tool"]
    filt = h5py_filter(tool, eb, spec["zbound"])
    wt, rt, size, rec = [], [], None, np.empty_like(arr)
    for i in range(spec["warmup"] + spec["repeat"]):
        with h5py.File(f"mem-{tool}-{i}.h5", "w", driver="core", backing_store=False, rdcc_nbytes=0) as f:
            t0 = time.perf_counter()
            ds = f.create_dataset("x", data=arr, chunks=arr.shape, **filt)
            f.flush()
            t1 = time.perf_counter()
            ds.read_direct(rec)
            t2 = time.perf_counter()
            size = ds.id.get_storage_size()
        if i >= spec["warmup"]:
            wt.append(t1 - t0)
            rt.append(t2 - t1)
    maxe, bad = check_error(arr, rec, eb)
    nbytes = arr.nbytes
    return {
        "tool": tool, "ratio": nbytes / size, "compress_mbps": nbytes / statistics.median(wt) / 1e6,
        "decompress_mbps": nbytes / statistics.median(rt) / 1e6, "max_err_over_eb": maxe / eb if eb > 0 else 0.0,
        "violations": bad, "bytes_out": size, "psnr": psnr(arr, rec),
    }


def psnr(orig, rec):
    """20 log10(value range / RMSE) over the finite values, as `zbound bench` reports it."""
    fin = np.isfinite(orig)
    o, r = orig[fin].astype(np.float64), rec[fin].astype(np.float64)
    mse = float(np.mean((o - r) ** 2)) if o.size else 0.0
    vrange = float(o.max() - o.min()) if o.size else 0.0
    return float("inf") if mse == 0 or vrange == 0 else 20 * np.log10(vrange) - 10 * np.log10(mse)


def run_h5py(tool, raw_path, arr, eb, args):
    spec = {"tool": tool, "raw": raw_path, "dtype": str(arr.dtype), "shape": list(arr.shape), "eb": eb,
            "repeat": args.repeat, "warmup": args.warmup, "zbound": args.zbound}
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)],
                       capture_output=True, text=True)
    if p.returncode == 0:
        return json.loads(p.stdout.strip().splitlines()[-1])
    why = f"crashed (signal {-p.returncode})" if p.returncode < 0 else f"failed (exit {p.returncode})"
    print(f"{tool}: {why}: {p.stderr.strip()[-300:]}", file=sys.stderr)
    nan = float("nan")
    return {"tool": tool, "ratio": nan, "compress_mbps": nan, "decompress_mbps": nan, "max_err_over_eb": nan,
            "violations": None, "bytes_out": None, "error": why}


def combine_rounds(rounds):
    """One row of a tool from its rounds (measured in turn with the other tools): the median speed of the rounds,
    the rounds' speeds kept; ratio and errors are the first round's (the same every round), violations the most."""
    row = dict(rounds[0])
    for key in ("compress_mbps", "decompress_mbps"):
        vals = [r[key] for r in rounds]
        row[key] = float("nan") if any(math.isnan(v) for v in vals) else float(statistics.median(vals))
        row[key + "_rounds"] = vals
    if all(r.get("violations") is not None for r in rounds):
        row["violations"] = max(r["violations"] for r in rounds)
    return row


def zbound_cd_values(zbound, eb):
    p = subprocess.run([zbound, "cdvalues", "--abs", repr(eb), "--predictor", "lorenzo", "--encoder", "fast",
                        "--format", "words"], capture_output=True, text=True, check=True)
    return tuple(int(w) for w in p.stdout.strip().split(","))


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zbound", default=os.path.join(ROOT, "build", "bin", "zbound"), help="the zbound CLI")
    ap.add_argument("--plugin-dir", default=os.path.join(ROOT, "build", "plugin"),
                    help="folder of libh5z_zbound.so (zbound through h5py is measured when it is there)")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--fields", default="cesm_trefht,gmt_sst,gmt_sst_nan0,radar_rainsum_f64")
    ap.add_argument("--rel", default="1e-2,1e-3,1e-4", help="bounds relative to the finite value range")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1, help="measure every tool this many times, in turn (median)")
    ap.add_argument("--json", default=os.path.join(ROOT, "bench", "results", "compare_cpu.json"))
    ap.add_argument("--pipelines", default="lorenzo/fast",
                    help="zbound pipelines PREDICTOR/ENCODER to measure, e.g. lorenzo/fast,auto/ratio")
    ap.add_argument("--no-zfp", action="store_true", help="skip ZFP")
    args = ap.parse_args()
    if args.repeat < 5:
        ap.error("--repeat must be at least 5 (medians of >= 5 runs)")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if not os.path.isfile(args.zbound):
        sys.exit(f"compare_cpu.py: zbound CLI not found at {args.zbound} (build first: bash scripts/setup.sh)")

    plugin = os.path.join(args.plugin_dir, "libh5z_zbound.so")
    if os.path.isfile(plugin):
        os.environ["HDF5_PLUGIN_PATH"] = os.path.abspath(args.plugin_dir)
    import h5py  # noqa: F401  (after HDF5_PLUGIN_PATH)
    import hdf5plugin

    fields = load_fields(args.data, args.fields.split(","))
    rels = [float(r) for r in args.rel.split(",")]
    tmp = tempfile.mkdtemp(prefix="zbound-cmp-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    rows = []
    try:
        for name, (arr, desc) in fields.items():
            raw_path = os.path.join(tmp, name + ".raw")
            arr.tofile(raw_path)
            fin = arr[np.isfinite(arr)]
            vrange = float(fin.max()) - float(fin.min())
            for rel in rels:
                eb = rel * vrange
                base = {"field": name, "shape": list(arr.shape), "dtype": str(arr.dtype), "rel": rel, "eb": eb,
                        "bytes_in": arr.nbytes}
                tools = (["zbound-h5py"] if os.path.isfile(plugin) else []) + ["sz3"] + ([] if args.no_zfp else ["zfp"])
                rounds = []
                for _ in range(args.rounds):
                    rounds.append([run_zbound_cli(args.zbound, raw_path, arr, eb, args.repeat, args.warmup, pl)
                                   for pl in args.pipelines.split(",")] +
                                  [run_h5py(tool, raw_path, arr, eb, args) for tool in tools])
                results = [combine_rounds([r[i] for r in rounds]) for i in range(len(rounds[0]))]
                for r in results:
                    rows.append({**base, **r})
                    print(f"{name:18s} rel {rel:<7g} {r['tool']:12s} CR {r['ratio']:8.3f}  comp "
                          f"{r['compress_mbps']:8.1f} MB/s  dec {r['decompress_mbps']:8.1f} MB/s  max err/eb "
                          f"{r['max_err_over_eb']:.4f}  violations {r['violations']}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # ---- markdown table ----
    print("| field | rel eb | abs eb | tool | CR | compress MB/s | decompress MB/s | max err / eb | violations |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("error"):
            print(f"| {r['field']} | {r['rel']:g} | {r['eb']:.6g} | {r['tool']} | {r['error']} | | | | |")
            continue
        print(f"| {r['field']} | {r['rel']:g} | {r['eb']:.6g} | {r['tool']} | {r['ratio']:.2f} | "
              f"{r['compress_mbps']:.1f} | {r['decompress_mbps']:.1f} | {r['max_err_over_eb']:.4f} | "
              f"{r['violations']} |")

    # ---- the ratio pipeline against SZ3 (issue 3): geometric mean of the CR ratio per bound, PSNR difference ----
    for pl in [p for p in args.pipelines.split(",") if p != "lorenzo/fast"]:
        tool = f"zbound:{pl}"
        print(f"\n{tool} vs SZ3 (fields where SZ3 ran and kept every value):")
        print("| rel eb | fields | geomean CR(zbound)/CR(SZ3) | mean PSNR(zbound) - PSNR(SZ3) dB | zbound loses on |")
        print("|---|---|---|---|---|")
        for rel in rels:
            pairs = []
            for name in fields:
                z = next((r for r in rows if r["field"] == name and r["rel"] == rel and r["tool"] == tool), None)
                q = next((r for r in rows if r["field"] == name and r["rel"] == rel and r["tool"] == "sz3"), None)
                if z and q and not q.get("error") and not z.get("error") and q["violations"] == 0:
                    pairs.append((name, z, q))
            if not pairs:
                continue
            gm = float(np.exp(np.mean([np.log(z["ratio"] / q["ratio"]) for _, z, q in pairs])))
            dpsnr = float(np.mean([z["psnr"] - q["psnr"] for _, z, q in pairs]))
            loses = ", ".join(f"{n} ({z['ratio'] / q['ratio']:.2f})" for n, z, q in pairs if z["ratio"] < q["ratio"])
            print(f"| {rel:g} | {len(pairs)} | {gm:.3f} | {dpsnr:+.2f} | {loses or '-'} |")

    # ---- speed against SZ3, per zbound pipeline measured (issue 7 criteria 1 and 2) ----
    checks = []
    for pl in args.pipelines.split(","):
        tool = "zbound" if pl == "lorenzo/fast" else f"zbound:{pl}"
        print(f"\nzbound {pl} (CLI) vs SZ3, one thread:")
        print("| field | rel eb | zbound/SZ3 compress speed | zbound/SZ3 decompress speed | zbound CR / SZ3 CR |")
        print("|---|---|---|---|---|")
        for key in sorted({(r["field"], r["rel"]) for r in rows}, key=lambda k: (k[0], -k[1])):
            z = next((r for r in rows if (r["field"], r["rel"]) == key and r["tool"] == tool), None)
            s = next((r for r in rows if (r["field"], r["rel"]) == key and r["tool"] == "sz3"), None)
            if z is None or s is None or z.get("error"):
                continue
            if s.get("error"):
                print(f"| {key[0]} | {key[1]:g} | SZ3 {s['error']} | | |")
                continue
            cs, ds = z["compress_mbps"] / s["compress_mbps"], z["decompress_mbps"] / s["decompress_mbps"]
            cr = z["ratio"] / s["ratio"]
            checks.append({"pipeline": pl, "field": key[0], "rel": key[1], "compress_speedup_vs_sz3": cs,
                           "decompress_speedup_vs_sz3": ds, "ratio_vs_sz3": cr})
            print(f"| {key[0]} | {key[1]:g} | {cs:.2f}x | {ds:.2f}x | {cr:.2f} |")
        mine = [c for c in checks if c["pipeline"] == pl]
        if mine:
            print(f"lowest: compress {min(c['compress_speedup_vs_sz3'] for c in mine):.2f}x, decompress "
                  f"{min(c['decompress_speedup_vs_sz3'] for c in mine):.2f}x")
    t = [r for r in rows if r["field"] == "cesm_trefht" and r["rel"] == 1e-3 and r["tool"] == "zbound"]
    if t:
        ok = t[0]["ratio"] >= 7.5 and t[0]["violations"] == 0
        print(f"TREFHT 440x64x128 rel 1e-3 ratio {t[0]['ratio']:.3f} (>= 7.5 with the bound held: {'yes' if ok else 'NO'})")
    all_zb_ok = all(r["violations"] == 0 for r in rows if r["tool"].startswith("zbound"))
    print(f"zbound bound held on every value of every run: {'yes' if all_zb_ok else 'NO'}")

    meta = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
            "commit": git_commit(), "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "repeat": args.repeat, "warmup": args.warmup, "rounds": args.rounds, "hdf5plugin": hdf5plugin.version,
            "h5py_hdf5": __import__("h5py").version.hdf5_version}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "rows": [{k: v for k, v in r.items() if k != "raw"} for r in rows],
                   "zbound_runs": [r["raw"] for r in rows if "raw" in r], "vs_sz3": checks}, f, indent=1)
    print(f"\nJSON: {args.json}")
    return 0 if all_zb_ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(h5py_worker(json.loads(sys.argv[2]))))
        sys.exit(0)
    sys.exit(main())
