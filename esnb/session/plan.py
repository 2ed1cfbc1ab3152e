"""A run, planned and checked before anything starts: :class:`RunPlan`, made by :func:`plan`,
kept in the run folder as ``plan.json``.

Order of work, so that a mistake costs nothing: the options and every setting are validated,
the env id checked (one step of it here), a resume's checkpoint read and what the new values
change in it judged, the run folder created and proven writable; only then may a cluster
start (:func:`esnb.session.run.run`). ``esnb train``, :func:`esnb.launch`, the results bench
and the sweeps all plan here, with the same code.

The plan file (:meth:`RunPlan.write`, :meth:`RunPlan.read`) is JSON::

    {"plan": 1, "algorithm": "es", "runner": "esnb.runners.es.runner:ES",
     "command": "train es", "name": "es-20261127-120000",
     "folder": "runs/es-20261127-120000",
     "options": {"preset": "laptop", "workers": 2, "serve": true, ...},
     "settings": {"env": "CartPole-v1", "sigma": 0.02, ...},
     "budget": {"generations": 30.0}, "default_budget": {"generations": 100.0},
     "resume": null, "live_changes": {}, "saved_target": {}, "parent": null}

``settings`` is a new run's whole configuration (as its checkpoint stores it); a resumed or
forked run's come from its checkpoint, ``live_changes`` applied over them as control changes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from esnb.record import checkpoint_of, load_checkpoint
from esnb.session.checks import (
    check_budget,
    check_cluster,
    check_env,
    check_free,
    check_name,
    check_schedule,
)
from esnb.session.finish import check_trackers
from esnb.session.folder import check_new
from esnb.session.options import RunOptions

#: where run folders go unless ``out`` says
RUNS = Path("runs")
#: the plan file in a run folder
PLAN_FILE = "plan.json"
#: the plan file's format
VERSION = 1


@dataclass(frozen=True)
class RunPlan:
    """A run, checked: what the session runs (see the module's text for its file).

    Attributes
    ----------
    algorithm : str
        ``esnb train``'s name of it (``es``, ``apex``, ``eorl``).
    runner : str
        The runner class, ``"module:Class"`` (EORL's ``--algorithm`` may choose a
        baseline's).
    command : str
        The command that resumes it, after ``esnb`` (``train es``).
    name : str
    folder : Path
        The run folder (made and writable).
    options : RunOptions
    settings : dict
        A new run's whole configuration; empty for a resume or a fork.
    budget : dict
        The totals given (counter: amount); empty: the saved run's, else ``default_budget``.
    default_budget : dict
    resume : Path, optional
        The checkpoint a resumed or forked run starts from.
    live_changes : dict
        Live settings applied over the checkpoint's, as control changes.
    saved_target : dict
        The budget the saved run was going to.
    parent : dict, optional
        A fork's origin (:mod:`esnb.runners.fork`).
    """

    algorithm: str
    runner: str
    command: str
    name: str
    folder: Path
    options: RunOptions = field(default_factory=RunOptions)
    settings: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, float] = field(default_factory=dict)
    default_budget: dict[str, float] = field(default_factory=dict)
    resume: Path | None = None
    live_changes: dict[str, Any] = field(default_factory=dict)
    saved_target: dict[str, float] = field(default_factory=dict)
    parent: dict[str, Any] | None = None

    @property
    def cls(self) -> type:
        """The runner class."""
        from esnb.runners.registry import load

        return load(self.runner)

    # -- the plan file -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (paths as text)."""
        out = asdict(self)
        out.update(options=self.options.to_dict(), folder=str(self.folder),
                   resume=None if self.resume is None else str(self.resume))
        return {"plan": VERSION, **out}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RunPlan:
        """A plan from :meth:`to_dict` (its options validated again)."""
        doc = dict(doc)
        if doc.pop("plan", None) != VERSION:
            raise ValueError(f"not an esnb run plan of format {VERSION}")
        doc["options"] = RunOptions.from_dict(doc.get("options") or {})
        doc["folder"] = Path(doc["folder"])
        doc["resume"] = None if doc.get("resume") is None else Path(doc["resume"])
        return cls(**doc)

    def write(self, path: Path | None = None) -> Path:
        """Write the plan into its run folder (``plan.json``, or ``path``)."""
        path = Path(path) if path is not None else self.folder / PLAN_FILE
        try:
            text = json.dumps(self.to_dict(), indent=1, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"settings must be plain values (numbers, strings, lists, "
                             f"dicts): {exc}") from None
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def read(cls, path) -> RunPlan:
        """The plan in ``path`` (a plan file, or a run folder holding one)."""
        path = Path(path)
        if path.is_dir():
            path = path / PLAN_FILE
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise ValueError(f"no run plan at {path}") from None
        except ValueError as exc:
            raise ValueError(f"{path} is no run plan: {exc}") from None
        try:
            return cls.from_dict(doc)
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"{path} is no run plan: {exc}") from None


def choose_runner(algo, settings: dict[str, Any], flags: Mapping[str, Any],
                  budget: dict[str, float], resume: str | None) -> tuple[type, dict, dict]:
    """The runner class, settings and budget of an algorithm: its own, or what its ``adapt``
    makes of them and of its own command flags (``flags``: EORL's ``--algorithm`` and
    environment version).

    ``adapt`` takes ``(args, settings)`` as the registry declares it (:class:`Algorithm`);
    ``args`` here holds ``resume``, the budget (``budget_<counter>``) and ``flags``, and what
    ``adapt`` sets in the budget comes back in it.
    """
    if not algo.adapt:
        if flags:
            raise ValueError(f"{algo.name} has no flag {', '.join(sorted(flags))}")
        return algo.load_runner(), settings, budget
    from esnb.runners.registry import load

    counters = [key for key, _ in algo.budgets.values()]
    args = SimpleNamespace(resume=resume, **flags,
                           **{f"budget_{key}": budget.get(key) for key in counters})
    runner, settings = load(algo.adapt)(args, dict(settings))
    budget = {key: getattr(args, f"budget_{key}") for key in counters
              if getattr(args, f"budget_{key}", None) is not None}
    return runner, settings, budget


def plan(algorithm, settings: Mapping[str, Any] | None = None,
         options: RunOptions | None = None, budget: Mapping[str, Any] | None = None,
         flags: Mapping[str, Any] | None = None, command: str | None = None,
         check_cluster_now: bool = True) -> RunPlan:
    """Validate everything a run needs before a cluster starts, and make its folder.

    Parameters
    ----------
    algorithm : str or Algorithm
        ``esnb train``'s name, or the registry's entry.
    settings : mapping, optional
        The algorithm's settings given (the preset's for the rest); beside ``resume`` or
        ``fork``, live ones become control changes and fixed ones must equal the saved.
    options : RunOptions, optional
        Default: ``esnb train``'s.
    budget : mapping, optional
        The run's totals by counter (``{"generations": 30}``).
    flags : mapping, optional
        The algorithm's own command flags (:attr:`Algorithm.flags`: EORL's).
    command : str, optional
        What resumes it after ``esnb`` (default ``train <algorithm>``).
    check_cluster_now : bool
        Check the options' cluster too (False: the run is given one).

    Raises
    ------
    ValueError
        Whatever is wrong, in one line; nothing has started.
    """
    from esnb.runners.checkpoint import check_writable
    from esnb.runners.registry import algorithms

    if isinstance(algorithm, str):
        known = algorithms()
        if algorithm not in known:
            raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(known)}")
        algorithm = known[algorithm]
    algo, options = algorithm, options or RunOptions()
    flag_of = {key: flag for flag, (key, _) in algo.budgets.items()}
    budget = check_budget(budget or {}, flag_of)
    if check_cluster_now:
        check_cluster(options.workers, options.address, options.serve)
    check_trackers(options)  # --tensorboard, --mlflow: before the run folder is made
    if options.fork and options.resume:
        raise ValueError("--fork and --resume exclude each other: a fork is a new run")
    if options.at is not None and not options.fork:
        raise ValueError("--at needs --fork RUN (the run to branch from)")
    cls, values, budget = choose_runner(algo, dict(settings or {}), dict(flags or {}), budget,
                                        options.resume)
    base = RunPlan(algorithm=algo.name, runner=f"{cls.__module__}:{cls.__qualname__}",
                   command=command or f"train {algo.name}", name="", folder=Path(),
                   options=options, budget=budget, default_budget=dict(algo.default_budget))
    if options.fork or options.resume:
        return _plan_resume(base, cls, values, check_writable)
    config = cls.Config.build(options.preset, **values)
    check_env(config)
    check_schedule(cls, config, options.controls)
    name = check_name(options.name) if options.name is not None else \
        f"{cls.algorithm.lower()}-{time.strftime('%Y%m%d-%H%M%S')}"
    name, folder = _new_folder(options, name)
    return replace(base, name=name, folder=check_writable(folder), settings=config.to_dict())


def _new_folder(options: RunOptions, name: str) -> tuple[str, Path]:
    """A new run's name and folder: the one asked for, refused when it holds a run; an
    unnamed run's default moved to the next free name."""
    chosen = options.name is not None or bool(options.out)
    folder = check_new(Path(options.out) if options.out else RUNS / name, chosen)
    return (name if chosen else folder.name), folder


def _plan_resume(base: RunPlan, cls: type, values: dict[str, Any], check_writable) -> RunPlan:
    """A resumed run, or (``fork``) a new run from a kept checkpoint of the fork's run."""
    from esnb.runners.fork import nearest

    options = base.options
    if options.fork:
        if options.at is None:
            raise ValueError("--fork needs --at N: the iteration to branch from")
        iteration, path = nearest(options.fork, options.at)
    else:
        path = checkpoint_of(options.resume)
    meta, _ = load_checkpoint(path, cls.algorithm)
    saved = meta["config"]
    config = cls.Config.from_dict({k: v for k, v in saved.items() if k != "name"})
    declared, before = config.declarations(), config.to_dict()
    live, fixed = {}, []
    for key, value in values.items():
        value = config.replace(**{key: value}).to_dict()[key]  # checked as a new run's would be
        if declared[key][0].live:
            live[key] = value
        elif value != before[key]:
            fixed.append(f"{key} (saved {before[key]!r}, given {value!r})")
    if fixed:
        raise ValueError(f"{path} was run with other fixed settings; leave them out or start "
                         f"a new run: {', '.join(fixed)}")
    check_env(config)  # a checkpoint's env kwargs may need what this machine lacks
    check_schedule(cls, config, options.controls)
    saved_name = meta.get("name", path.parent.name)
    parent = None
    if options.fork:
        default = f"{saved_name}-fork{iteration}"
        parent = {"run": str(Path(options.fork)), "name": saved_name, "iteration": iteration,
                  "checkpoint": str(path),
                  "changes": {k: v for k, v in live.items() if v != before[k]}}
    name = check_name(options.name) if options.name is not None else \
        (default if options.fork else saved_name)
    if options.fork or (options.out and Path(options.out).resolve() != path.parent.resolve()):
        name, folder = _new_folder(options, name)  # a new folder: it must hold no run
    else:
        folder = check_free(path.parent)  # the resumed run's own: no live run in it
    folder = check_writable(folder)
    return replace(base, name=name, folder=folder, resume=path, live_changes=live,
                   saved_target=dict(meta.get("target") or {}), parent=parent)
