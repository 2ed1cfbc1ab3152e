"""The noise table's build: esnb's portable stream against numpy's own normals, side by side.

A host's table is built once (the first process) and mapped by every other; its values come
from :mod:`esnb.normals` (integer and IEEE 754 operations only: the same bits on any machine),
where esnb used numpy's ``Generator.standard_normal`` before (which numpy does not promise to
keep). Measured, alternating the two so both see the same load: seconds to fill a table of
``--size`` entries, their ratio, and the SHA-256 every builder records beside the table (what
workers compare with the driver's); and, in the same rounds, reading the table back from the
disk cache (:mod:`esnb.noise_cache`, a temporary folder here) with its SHA-256 check: what a
run after a machine's first pays instead of the build.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time

import numpy as np

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import Session
from esnb.settings import integer


def add_arguments(p) -> None:
    p.add_argument("--size", type=integer(2), default=None,
                   help="entries of the table (default: esnb's table, dask config "
                        "esnb.noise.size)")
    p.add_argument("--repeats", type=integer(1), default=5,
                   help="builds of each, alternating (the median is reported)")
    add_json(p)


def measure(size: int | None = None, repeats: int = 5, seed: int | None = None) -> dict:
    """Build times of the table of ``size`` entries from ``seed`` (None: esnb's configured
    table's)."""
    from esnb.noise import NoiseConfig, describe_table
    from esnb.noise_cache import CachedFill

    table = NoiseConfig.configured(size, seed)
    size, seed = table.size, table.seed

    out = np.empty(int(size), dtype=np.float32)
    times: dict[str, list[float]] = {"esnb": [], "numpy": [], "sha256": [], "cached": []}
    folder = tempfile.mkdtemp(prefix="esnb-bench-noise-")
    try:
        first = CachedFill(table.file_name, seed, describe_table, directory=folder)
        first.fill(out)
        first.describe(out)  # writes the cache file
        for _ in range(int(repeats)):
            _round(times, seed, out, folder, table.file_name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"size": int(size), "repeats": int(repeats), "seconds": med, "all": times,
            "ratio": med["esnb"] / med["numpy"], "cached_over_build": med["cached"] / med["esnb"]}


def _round(times: dict, seed: int, out: np.ndarray, folder: str, name: str) -> None:
    """One build of each kind, appended to ``times``."""
    from esnb import normals
    from esnb.noise import describe_table
    from esnb.noise_cache import CachedFill

    t0 = time.perf_counter()
    normals.fill_standard_normal(seed, out)
    times["esnb"].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    normals.digest(out)
    times["sha256"].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    np.random.Generator(np.random.PCG64(seed)).standard_normal(out=out, dtype=np.float32)
    times["numpy"].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    cached = CachedFill(name, seed, describe_table, directory=folder)
    cached.fill(out)  # read, and checked against the file's SHA-256
    cached.describe(out)
    times["cached"].append(time.perf_counter() - t0)
    if not cached.hit:
        raise RuntimeError(f"the noise cache in {folder} was not read")


def run(args) -> int:
    session = Session()
    r = measure(args.size, args.repeats)
    s = r["seconds"]
    print(f"noise table of {r['size']:,} float32 entries, median of {r['repeats']} builds each "
          f"(alternating):")
    print(f"  esnb (portable: integers and IEEE 754 operations) {s['esnb']:.3f} s")
    print(f"  numpy Generator.standard_normal (esnb's table before) {s['numpy']:.3f} s")
    print(f"  ratio {r['ratio']:.2f}x; SHA-256 of the table (recorded by its builder) "
          f"{s['sha256']:.3f} s")
    print(f"  read from the disk cache with its SHA-256 check (every run after a machine's "
          f"first) {s['cached']:.3f} s = {r['cached_over_build']:.2f}x esnb's build")
    return session.done(args, r, rerun=f"esnb bench noise --size {r['size']}")
