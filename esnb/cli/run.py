"""One ``esnb train`` (or ``esnb demo``) run from start to exit: checked inputs, a run folder,
periodic checkpoints, clean interrupts, resumes.

Order of work, so that a mistake costs nothing: every setting is validated and the env id
checked, the run folder created and proven writable, and only then is a cluster started. While
the run goes, a checkpoint is written every ``--checkpoint-every`` seconds into the run folder.
SIGINT (Ctrl-C) or SIGTERM (``scancel``, a batch time limit) stops the run after its current
iteration; the checkpoint and the run folder are written, the cluster released, and one line
says where the run stopped and the exact command that resumes it (exit 130 / 143). A second
Ctrl-C exits at once.

Budgets on the command line are the run's totals (``--generations 30`` ends at generation 30,
resumed or not); a resume without a budget flag continues to the budget it was given.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esnb.record import checkpoint_of, load_checkpoint

#: a run name: letters, digits, ``._-``, not starting with a dot (it names a folder of runs/)
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
RUNS = Path("runs")


@dataclass
class Plan:
    """A run, checked before anything starts."""

    cls: type
    folder: Path
    name: str
    settings: dict[str, Any] = field(default_factory=dict)
    resume: Path | None = None
    live_changes: dict[str, Any] = field(default_factory=dict)
    saved_target: dict[str, float] = field(default_factory=dict)
    parent: dict[str, Any] | None = None  # a fork's origin (esnb.runners.fork)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"--name must be a plain name (letters, digits, '._-', no path), "
                         f"got {name!r}")
    return name


def plan_run(cls: type, values: dict[str, Any], args) -> Plan:
    """Validate everything the run needs before a cluster starts: settings (or the
    checkpoint and what the flags change in it), the env id, the run folder."""
    from esnb.runners.checkpoint import check_writable

    check_cluster(args)
    if getattr(args, "fork", None):
        if args.resume:
            raise ValueError("--fork and --resume exclude each other: a fork is a new run")
        return _plan_resume(cls, values, args, fork=True)
    if getattr(args, "at", None) is not None:
        raise ValueError("--at needs --fork RUN (the run to branch from)")
    if args.resume:
        return _plan_resume(cls, values, args)
    config = cls.Config.build(args.preset, **values)
    check_env(config)
    check_schedule(cls, config, args)
    name = check_name(args.name) if args.name is not None else \
        f"{cls.algorithm.lower()}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = check_writable(check_free(Path(args.out) if args.out else RUNS / name))
    return Plan(cls, folder, name, settings=config.to_dict())


def check_free(folder: Path) -> Path:
    """``folder`` unless a served run still runs there (two runs would write one folder)."""
    from esnb.remote.attach import serving_info

    info = serving_info(folder)
    if info is not None:
        raise ValueError(f"run {info['name']!r} is running in {folder} (pid {info['pid']}): "
                         f"attach to it (esnb.attach({str(folder)!r})) or choose another "
                         f"--name/--out")
    return folder


def check_schedule(cls: type, config, args) -> None:
    """``--controls``: the whole record of control changes, read against the run's controls
    before any cluster starts."""
    from esnb.runners.schedule import ControlSchedule

    if getattr(args, "controls", None):
        ControlSchedule(args.controls, config.controls(), cls.iteration_column)


def check_cluster(args) -> None:
    """``--workers``, ``--address``, ``--serve`` and the cluster dask config chooses
    (``esnb.cluster.type``) before anything starts."""
    from esnb import config

    if args.workers < 0:
        raise ValueError(f"--workers must be >= 0 (0: this process), got {args.workers}")
    kind = str(config.get("cluster.type", "local")).lower()
    if getattr(args, "serve", False):
        from esnb.remote.serve import check_servable

        check_servable(args.address, kind, args.workers)
    if args.address:
        from esnb.cluster import check_address

        check_address(args.address, "--address")
    elif kind == "local":
        config.check_local_workers(args.workers, "--workers")
    elif kind != "address" and args.workers > 0:
        import importlib.util

        if importlib.util.find_spec("dask_jobqueue") is None:
            raise ValueError(f"esnb.cluster.type {kind!r} needs dask-jobqueue: "
                             f"pip install 'esnb[jobqueue]'")


def check_env(config) -> None:
    """The run's environment exists and takes its keyword arguments: one step of it here,
    before any cluster starts (a wrong value fails there, not deep inside a worker). A pixel
    env (Atari, MinAtar) is refused unless the algorithm's network takes frames (Ape-X DQN,
    IMPALA), and then so are a ``torso`` that does not fit the observations and an env without
    a time limit of its own (MinAtar) without ``max_episode_steps``."""
    from esnb.envs.make import check_env_works, check_time_limit, env_spaces
    from esnb.envs.pixels import check_vector_obs
    from esnb.nets.conv import choose_torso

    if not getattr(type(config), "takes_frames", False):
        check_vector_obs(config.env, type(config).algorithm)
    if config.declarations()["env"][0].choices:  # esnb's own envs, made by their runner
        return
    kwargs = getattr(config, "env_kwargs", None) or {}
    cap = getattr(config, "max_episode_steps", None)
    if "torso" not in config.declarations():
        check_env_works(config.env, kwargs, cap)
        return
    # the network follows the observations: the env's spaces (made and stepped once) decide
    obs_space, _, limit = env_spaces(config.env, **kwargs)
    check_time_limit(config.env, limit, cap)
    choose_torso(config.torso, config.env, obs_space, type(config).algorithm.lower())


def _plan_resume(cls: type, values: dict[str, Any], args, fork: bool = False) -> Plan:
    """A resumed run, or (``fork``) a new run from a kept checkpoint of ``--fork``'s run."""
    from esnb.runners.checkpoint import check_writable
    from esnb.runners.fork import nearest

    if fork:
        if args.at is None:
            raise ValueError("--fork needs --at N: the iteration to branch from")
        iteration, path = nearest(args.fork, args.at)
    else:
        path = checkpoint_of(args.resume)
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
    check_schedule(cls, config, args)
    saved_name = meta.get("name", path.parent.name)
    parent = None
    if fork:
        default = f"{saved_name}-fork{iteration}"
        parent = {"run": str(Path(args.fork)), "name": saved_name, "iteration": iteration,
                  "checkpoint": str(path),
                  "changes": {k: v for k, v in live.items() if v != before[k]}}
    name = check_name(args.name) if args.name is not None else \
        (default if fork else saved_name)
    folder = check_writable(check_free(Path(args.out) if args.out else
                                       (RUNS / name if fork else path.parent)))
    return Plan(cls, folder, name, resume=path, live_changes=live,
                saved_target=dict(meta.get("target") or {}), parent=parent)


def build_runner(plan: Plan, executor):
    if plan.resume is not None:
        runner = plan.cls.load(plan.resume, client=executor, name=plan.name)
        if plan.live_changes:
            runner.controls.set(**plan.live_changes)  # recorded as control changes
        if plan.parent is not None:
            runner.parent = plan.parent
        return runner
    return plan.cls(client=executor, config=plan.cls.Config.from_dict(plan.settings),
                    name=plan.name)


def remaining(runner, given: dict[str, float], default: dict[str, float],
              saved: dict[str, float]) -> dict[str, float]:
    """The budget still to run: the given totals, else the saved run's, else the default."""
    totals = given or saved or default
    now = runner._progress()
    return {key: max(0.0, float(total) - float(now.get(key, 0))) for key, total in totals.items()}


class Interrupts:
    """SIGINT and SIGTERM from the moment a command starts its cluster: the first stops the run
    after its current iteration (the runner then writes its checkpoint), or, before the run
    has started, keeps it from starting; a second SIGINT exits at once.

    The workers of esnb's own LocalCluster ignore both signals (:mod:`esnb.cluster.signals`):
    a terminal sends Ctrl-C to the whole process group, and they are the driver's to stop.
    """

    def __init__(self, runner=None):
        self.runner = runner
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def watch(self, runner) -> None:
        """From now on a signal stops ``runner``."""
        self.runner = runner
        if self.signum is not None:
            runner.stop()

    def _handle(self, signum, frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            sys.stderr.write("\nesnb: interrupted twice: exiting now\n")
            os._exit(130)
        if self.signum is None:
            self.signum = signum
            what = ("stopping after the current iteration and writing a checkpoint"
                    if self.runner is not None and self.runner.running
                    else "not starting the run")
            sys.stderr.write(f"\nesnb: {signal.Signals(signum).name}: {what} (Ctrl-C again "
                             f"to quit at once)\n")
            if self.runner is not None:
                self.runner.stop()

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum) if self.signum is not None else 0


def resume_command(argv0: str, command: str, folder: Path) -> str:
    return f"{argv0} {command} --resume {shlex.quote(str(folder))}"


def stopped_line(runner, signum: int, command: str) -> str:
    """The one line printed on an interrupt: where the run stopped, how to resume it."""
    progress = runner._progress()
    where = f"{runner.iteration_column} {runner.iteration:,}"
    if "env_steps" in progress:
        where += f", {int(progress['env_steps']):,} env steps"
    return (f"esnb: {signal.Signals(signum).name}: {runner.title} run stopped at {where}; "
            f"checkpoint written; resume with: {command}")
