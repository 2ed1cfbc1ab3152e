"""Run every entry of the results page over seeds and regenerate docs/results.md.

Each entry (:data:`esnb.bench.results.catalogue.ENTRIES`) is run once per seed at its budget
on one LocalCluster as a run of the session (``--runs`` keeps their run folders, and resumes a
seed stopped before its end), its final parameters evaluated afresh, and its runs saved as
``docs/results/<key>.json``; the page and its figures are then rendered from every saved
entry. ``--only`` re-runs some entries and keeps the others' saved runs; ``--missing`` keeps
an entry's saved seeds and runs only those it lacks (a long entry filled in over sessions and
machines); ``--render`` runs nothing; ``--check`` exits 1 when the page differs from what the
saved runs render.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from esnb.bench.results import page
from esnb.bench.results.catalogue import ENTRIES, entry
from esnb.bench.results.runs import check_kept_folder, hardware, load, run_seed, save
from esnb.settings import integer


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", nargs="+", choices=[e.key for e in ENTRIES],
                   help="run these entries only, the others keep their saved runs (default: "
                        "every entry)")
    p.add_argument("--seeds", type=integer(2), default=None,
                   help="seeds per entry (0, 1, ...) [default: each entry's own: 5, or 3 for an "
                        "entry of an hour and more a seed]")
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster workers")
    p.add_argument("--render", action="store_true",
                   help="run nothing: rewrite the page from the saved runs")
    p.add_argument("--check", action="store_true",
                   help="run nothing: exit 1 if the page differs from the saved runs")
    p.add_argument("--root", type=Path, default=None,
                   help="the repository whose docs/ to write (default: this checkout)")
    p.add_argument("--runs", type=Path, default=None, metavar="DIR",
                   help="keep each seed's run folder in DIR/<entry>/seed<k>: its checkpoints, "
                        "and a seed stopped before its end resumes from it (default: a "
                        "temporary folder per seed)")
    p.add_argument("--missing", action="store_true",
                   help="keep each entry's saved seeds and run only the seeds it lacks "
                        "(refused when the saved entry ran another budget or settings)")


def repo_root() -> Path:
    """The checkout esnb runs from (the page lives in its docs/); for an installed esnb,
    the current directory."""
    checkout = Path(__file__).resolve().parents[3]
    return checkout if (checkout / "pyproject.toml").exists() else Path.cwd()


def run(args) -> int:
    root = args.root or repo_root()
    if args.root is not None and not args.root.is_dir():
        what = "is a file, not a folder" if args.root.exists() else "does not exist"
        raise ValueError(f"--root {args.root} {what} (the checkout whose docs/ holds the "
                         f"results page)")
    if args.check and not (root / page.DATA).is_dir():
        raise ValueError(f"--root {root} holds no saved results ({page.DATA}/): nothing to "
                         f"check the page against")
    if args.check:
        bad = page.stale(root)
        for rel in bad:
            print(f"stale: {rel} (esnb bench results --render)")
        return 1 if bad else 0
    if not args.render:
        keys = args.only or [e.key for e in ENTRIES]
        _run_entries([entry(k) for k in keys], root, args.seeds, args.workers, args.runs,
                     missing=args.missing)
    for path in page.write(root):
        print(f"wrote {path}")
    return 0


def _finished(folder: Path | None) -> bool:
    return folder is not None and (folder / "summary.json").exists()


def _saved_seeds(e, root: Path) -> tuple[list[dict], float | None, dict | None]:
    """``--missing``: the seeds ``e`` has saved, with the load and machine its saved file
    names; refused (``ValueError``, nothing run) when they ran another budget or settings."""
    doc = load(root / page.DATA / f"{e.key}.json")
    if doc is None:
        return [], None, None
    ran = {k: doc.get(k) for k in ("env", "budget", "settings", "eval_episodes")}
    now = {"env": e.env, "budget": e.budget, "settings": e.settings,
           "eval_episodes": e.eval_episodes}
    if ran != now:
        differ = ", ".join(k for k in now if ran[k] != now[k])
        raise ValueError(f"{e.key}: its saved seeds ran another {differ} than the catalogue's; "
                         f"run the whole entry again (esnb bench results --only {e.key})")
    return doc["seeds"], doc["load_average"][0], doc["hardware"]


def _run_entries(entries, root: Path, seeds: int | None, workers: int,
                 runs: Path | None = None, missing: bool = False) -> None:
    from esnb.cluster import make_client

    kept = {e.key: _saved_seeds(e, root) if missing else ([], None, None) for e in entries}
    if runs is not None:  # a kept folder of other settings is refused before a cluster starts
        for e in entries:
            for seed in range(e.seeds if seeds is None else seeds):
                check_kept_folder(e, seed, runs / e.key / f"seed{seed}")
    client = make_client(workers, dashboard_address=":0", silence_logs=logging.ERROR)
    try:
        for e in entries:
            rows, load0, machine = kept[e.key]
            if machine is None:
                load0, machine = os.getloadavg()[0], hardware()  # the commit the runs ran
            have = {row["seed"] for row in rows}
            folders = {seed: None if runs is None else runs / e.key / f"seed{seed}"
                       for seed in range(e.seeds if seeds is None else seeds)
                       if seed not in have}
            # seeds already run to their end first (read back, not run): saved at once
            for seed in sorted(folders, key=lambda k: not _finished(folders[k])):
                row = run_seed(e, seed, client, folders[seed])
                rows = sorted([*rows, row], key=lambda r: r["seed"])
                print(f"{e.key} seed {seed}: final {row['final']:.2f} after "
                      f"{row['env_steps']:,} env steps, {row['wall_s']:.0f} s", flush=True)
                # after every seed: a run of hours stopped later keeps what it finished (the
                # page says on how many of the entry's seeds its score rests)
                save(root / page.DATA / f"{e.key}.json", e, rows, workers,
                     (load0, os.getloadavg()[0]), machine)
    finally:
        client.close()
