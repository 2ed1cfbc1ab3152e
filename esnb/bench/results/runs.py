"""Running the results page's entries: one whole run per (entry, seed), its learning curve and
the final evaluation of its final parameters, saved as one JSON file per entry.

A seed is a run of the session (:mod:`esnb.session`), as ``esnb train`` runs one: planned,
with its own run folder, checkpoints and resume, to the entry's budget; the curve is the
history's score column against env steps and wall seconds; the final score is the run's final
evaluation, a fresh noise-free one (``runner.evaluate_final``) of the parameters the run ended
with, not the best evaluation seen during training. EORL's table
cells run :func:`esnb.runners.eorl.tasks.run_one` (the paper's metric: the mean return of the
last 100 training episodes).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from esnb.bench.results.catalogue import Entry

#: in a seed's run folder: the esnb commit and the date it ran at
RAN = "ran.json"

#: a curve keeps at most this many points (the page's plots need no more)
CURVE_POINTS = 80
#: packages whose versions the page prints
PACKAGES = ("esnb", "numpy", "torch", "gymnasium", "mujoco", "dask", "distributed")


def run_seed(entry: Entry, seed: int, client, folder: Path | None = None) -> dict[str, Any]:
    """One seed of ``entry``: ``{seed, final, final_std, env_steps, wall_s, curve}``;
    ``curve`` is a list of ``[env_steps, wall_seconds, score]``.

    The seed is a run of the session (:func:`esnb.session.run.run`) on ``client`` with its
    own run folder, ``folder`` (default: a temporary one): its checkpoints go there, a
    folder holding a checkpoint but no final evaluation (a run stopped before its end, whose
    summary says so) is resumed, and one holding a finished run is read back (its summary and
    history), not run again.
    A signal stops the run after its iteration, its checkpoint written, and raises
    ``KeyboardInterrupt``.
    """
    ran = {"commit": _commit(), "date": datetime.date.today().isoformat()}  # at its start
    if entry.algorithm == "eorl-table":
        return {**_eorl_seed(entry, seed), **ran}
    import tempfile

    if folder is None:
        with tempfile.TemporaryDirectory(prefix=f"esnb-results-{entry.key}-") as where:
            return run_seed(entry, seed, client, Path(where) / f"seed{seed}")
    from esnb.session.options import RunOptions
    from esnb.session.plan import plan
    from esnb.session.run import run

    folder = Path(folder)
    check_kept_folder(entry, seed, folder)
    # a run stopped before its end (Ctrl-C, SIGTERM) writes its summary without the final
    # evaluation: with its checkpoint it is resumed, not read back
    resume = (folder / "checkpoint.npz").exists() and not _ended(folder)
    if not resume and (folder / "summary.json").exists() and (folder / "history.csv").exists():
        return _finished_seed(seed, folder)  # run to its end before: read, not run again
    options = RunOptions.of(preset=entry.preset, name=f"results-{entry.key}-{seed}",
                            out=str(folder), progress=False, final_eval=entry.eval_episodes,
                            resume=str(folder) if resume else None)
    settings = {} if resume else {"env": entry.env, "seed": seed, **entry.settings}
    checked = plan(entry.algorithm, settings, options, entry.budget, check_cluster_now=False)
    # a seed may take hours: a line each 5% of its budget says how far and how long yet
    outcome = run(checked, executor=client, say=False, progress_lines=f"{entry.key} seed {seed}")
    if outcome.stopped:
        raise KeyboardInterrupt(f"{entry.key} seed {seed} stopped; its run folder {folder} "
                                f"resumes it")
    import pandas as pd

    # kept beside the run: a seed read back in a later session says where it ran
    (folder / RAN).write_text(json.dumps(ran) + "\n")
    return _seed_row(seed, outcome.summary, pd.DataFrame(outcome.records), ran)


def check_kept_folder(entry: Entry, seed: int, folder: Path | None) -> None:
    """Refuse (``ValueError``, one line) a seed's kept run folder whose run has other settings
    than the ones ``entry`` gives that seed now: a finished run would be read back as the
    entry's, a stopped one resumed with its old settings, after a preset changed under them.

    Settings the preset leaves to the runner (``None``: e.g. ``obs_norm``, decided by the
    action space) are not compared; a folder without a run passes.
    """
    if folder is None or entry.algorithm == "eorl-table":
        return
    folder = Path(folder)
    saved = None
    if (folder / "summary.json").exists():
        saved = json.loads((folder / "summary.json").read_text()).get("config")
    elif (folder / "checkpoint.npz").exists():
        from esnb.record import load_checkpoint

        saved = load_checkpoint(folder / "checkpoint.npz")[0].get("config")
    if saved is None:
        return
    from esnb.runners.registry import algorithms

    config = algorithms()[entry.algorithm].load_config()
    now = config.build(entry.preset, env=entry.env, seed=seed, **entry.settings).to_dict()
    # a setting added after the run was saved: the run had what its default does now
    added = {f.name: f.default for f in dataclasses.fields(config) if f.name not in saved}
    differ = [f"{k} {saved.get(k, added.get(k))!r} (now {v!r})" for k, v in now.items()
              if v is not None and saved.get(k, added.get(k)) != v]
    if differ:
        raise ValueError(f"{folder} ran other settings than {entry.key} seed {seed} has now: "
                         f"{'; '.join(differ)}; move the folder away to run the seed again")


def _seed_row(seed: int, summary: dict[str, Any], history,
              ran: dict[str, Any]) -> dict[str, Any]:
    last = history.iloc[-1]
    return {"seed": seed, "final": summary["final_eval_mean"],
            "final_std": summary["final_eval_std"],
            "env_steps": int(last["env_steps"]), "wall_s": float(last["wall_time"]),
            "curve": _curve(history), "commit": ran.get("commit"), "date": ran.get("date")}


def _ended(folder: Path) -> bool:
    """Whether ``folder`` holds a run that reached its end (its summary has the final
    evaluation), not one stopped before it."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("final_eval_mean") is not None


def _finished_seed(seed: int, folder: Path) -> dict[str, Any]:
    """The row of a seed whose run folder holds its finished run (a results run stopped
    after this seed: its later seeds resume, this one is read back)."""
    import pandas as pd

    summary = json.loads((folder / "summary.json").read_text())
    if summary.get("final_eval_mean") is None:
        raise ValueError(f"{folder} holds a run that ended without its final evaluation; "
                         f"move it away to run this seed again")
    try:
        ran = json.loads((folder / RAN).read_text())
    except (OSError, ValueError):  # a folder kept before seeds said where they ran
        ran = {}
    return _seed_row(seed, summary, pd.read_csv(folder / "history.csv"),
                     ran if isinstance(ran, dict) else {})


def _curve(history) -> list[list[float]]:
    """The score column (periodic evaluations where there are some, else the training
    return) against env steps and wall seconds, thinned to :data:`CURVE_POINTS`."""
    for column, enough in (("eval_return", 2), ("return_mean", 1)):
        if column in history:
            rows = history[["env_steps", "wall_time", column]].dropna()
            if len(rows) >= enough:
                break
    else:
        raise RuntimeError(f"the history has no score column: {list(history.columns)}")
    values = rows.to_numpy(dtype=np.float64)
    keep = np.unique(np.linspace(0, len(values) - 1, min(CURVE_POINTS, len(values))).astype(int))
    return [[round(float(x), 4) for x in row] for row in values[keep]]


def _eorl_seed(entry: Entry, seed: int) -> dict[str, Any]:
    from esnb.runners.eorl.tasks import LAST, RunSpec, run_one

    settings = dict(entry.settings)
    algorithm = settings.pop("algorithm")
    spec = RunSpec(algorithm, entry.env, tuple(settings.items()),
                   episodes=int(entry.budget["episodes"]), seed=seed)
    t0 = time.perf_counter()
    row = run_one(spec)
    returns = np.asarray(row["returns"], dtype=np.float64)
    # the curve: the mean of the last 100 episodes, as the metric, every 10 episodes
    ends = np.arange(10, returns.size + 1, 10)
    steps = np.linspace(0, row["env_steps"], returns.size + 1)[ends]
    wall = np.linspace(0, time.perf_counter() - t0, returns.size + 1)[ends]
    curve = [[float(s), round(float(w), 4), round(float(returns[max(0, e - LAST):e].mean()), 4)]
             for s, w, e in zip(steps, wall, ends)]
    return {"seed": seed, "final": row["last100"], "final_std": float(returns[-LAST:].std()),
            "env_steps": int(row["env_steps"]), "wall_s": round(row["seconds"], 3),
            "curve": curve}


def hardware() -> dict[str, Any]:
    """The machine and the versions a result was measured with."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "os": f"{platform.system()} {platform.release()}", "versions": versions,
            "commit": _commit(), "date": datetime.date.today().isoformat()}


def _commit(package: Path | None = None) -> str | None:
    """The commit of the checkout holding ``package`` (default: esnb's), ``+changes`` after it
    when the files under it differ from that commit (what ran was not that commit's code);
    None outside a git checkout."""
    package = Path(__file__).resolve().parents[2] if package is None else package
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=package, timeout=10)
        changed = subprocess.run(["git", "status", "--porcelain", "--", "."],
                                 capture_output=True, text=True, cwd=package, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    if not commit:
        return None
    return commit + ("+changes" if changed.returncode == 0 and changed.stdout.strip() else "")


def save(path: Path, entry: Entry, seeds: list[dict], workers: int,
         load: tuple[float, float], machine: dict[str, Any] | None = None) -> None:
    """Write one entry's data (its spec as run, every seed, ``machine``: the hardware and
    commit when it started, default now)."""
    doc = {"key": entry.key, "algorithm": entry.algorithm, "preset": entry.preset,
           "env": entry.env, "budget": entry.budget, "settings": entry.settings,
           "eval_episodes": entry.eval_episodes, "workers": workers,
           "load_average": [round(x, 2) for x in load], "hardware": machine or hardware(),
           "seeds": seeds,
           "interval": interval([s["final"] for s in seeds])}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


#: the interval the page gives each entry (:func:`esnb.runners.sweep.mean_ci`)
CI_METHOD = "t"


def interval(finals: list[float]) -> dict[str, Any]:
    """The mean of ``finals`` and its Student-t 95% interval, kept with the finals and the
    method it was computed from: the page prints it as saved, so another scipy or numpy
    cannot move a checked-in number (a saved interval of another method is recomputed)."""
    from esnb.runners.sweep import mean_ci

    mean, lo, hi = mean_ci(finals, method=CI_METHOD)
    return {"finals": list(finals), "method": CI_METHOD, "mean": mean, "lo": lo, "hi": hi}


#: what the page reads of a saved entry, and of each of its seeds
SAVED_KEYS = ("budget", "workers", "load_average", "hardware", "seeds")
SEED_KEYS = ("seed", "final", "final_std", "env_steps", "wall_s", "curve")
HARDWARE_KEYS = ("cpu", "cores", "python", "os", "versions", "commit", "date")


def load(path: Path) -> dict[str, Any] | None:
    """One entry's saved data, None when it has not been run; a file that is no saved entry
    (not JSON, truncated, another shape) is one ``ValueError`` line naming it."""
    path = Path(path)
    again = f"restore it or run it again (esnb bench results --only {path.stem})"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ValueError(f"{path} is a folder, not a saved result (a JSON file)") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(f"cannot read the saved result {path}: {why}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} is no JSON ({exc}; truncated?): {again}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path} holds a JSON {type(doc).__name__}, not a saved result (an "
                         f"object with {', '.join(SAVED_KEYS)}): {again}")
    missing = [key for key in SAVED_KEYS if key not in doc]
    if missing:
        raise ValueError(f"{path} is no saved result: it lacks {', '.join(missing)}: {again}")
    seeds, hw = doc["seeds"], doc["hardware"]
    if not isinstance(seeds, list) or not all(
            isinstance(s, dict) and all(k in s for k in SEED_KEYS) for s in seeds):
        raise ValueError(f"{path}: seeds must be a list of objects with "
                         f"{', '.join(SEED_KEYS)}: {again}")
    if not isinstance(hw, dict) or not all(k in hw for k in HARDWARE_KEYS) \
            or not isinstance(hw["versions"], dict):
        raise ValueError(f"{path}: hardware must be an object with "
                         f"{', '.join(HARDWARE_KEYS)}: {again}")
    return doc
