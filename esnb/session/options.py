"""How one run is run, declared once: :class:`RunOptions`, the options of every run beside
its algorithm's settings.

Each option is a :func:`~esnb.settings.setting` of a :class:`~esnb.settings.Settings`
dataclass, as an algorithm's settings are: its default, bounds and help, validated when an
options object is made (``RunOptions.of(workers=-1)`` names ``workers``). The command line's
flags are generated from them (:func:`add_arguments`: ``esnb train``'s every option, ``esnb
demo``'s cluster and folder ones); :func:`esnb.launch`, the results bench and the sweeps make
the same object from keywords. A :class:`~esnb.session.plan.RunPlan` carries it into the run
folder's ``plan.json``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, ClassVar

from esnb.settings import PRESETS, Settings, setting
from esnb.settings.cli import Flag, flagged, given
from esnb.settings.cli import add_arguments as add_settings_arguments


def option(default: Any, *, help: str, metavar: str = "", says: str = "",
           const: Any = None, bare: bool = False, choices: tuple = (), **kw: Any) -> Any:
    """A run option: a :func:`~esnb.settings.setting` and how its flag reads (``says``: its
    default in words; ``bare``: the flag may come without a value, then ``const``)."""
    flag = Flag(metavar=metavar, default=says, choices=choices,
                **({"const": const} if bare else {}))
    return flagged(setting(default, help=help, **kw), flag)


@dataclass(frozen=True)
class RunOptions(Settings):
    """The options of one run: its cluster, its folder and checkpoints, where it starts from,
    what watches it, how it ends.

    The defaults are ``esnb train``'s; :func:`esnb.launch` serves (``serve``) without a
    progress bar.
    """

    title: ClassVar[str] = "run"

    preset: str = option("laptop", kind="str", choices=PRESETS,
                         help="defaults tuned for a 2-core laptop, or the papers' published "
                              "settings")
    workers: int = option(2, low=0, help="LocalCluster worker processes (0: run in this "
                                         "process)")
    address: str | None = option(None, kind="str",
                                 says="a LocalCluster, or dask config esnb.cluster.type",
                                 help="join this Dask scheduler instead of starting a "
                                      "LocalCluster")
    out: str | None = option(None, kind="str", says="runs/<name>, or the resumed run's folder",
                             help="run folder")
    name: str | None = option(None, kind="str", says="<algorithm>-<time>",
                              help="run name: the folder runs/<name>")
    checkpoint_every: float = option(60.0, low=0, metavar="SECONDS",
                                     help="write the run's checkpoint this often, and when it "
                                          "ends")
    progress: bool = option(True, help="progress on stderr: a bar on a terminal, else a line "
                                       "each 5% of the budget (--no-progress: none)")
    tensorboard: str | None = option(
        None, kind="str", metavar="DIR", says="off", bare=True, const="",
        help="also log every history column and each control change for TensorBoard, into "
             "DIR (without DIR: <run folder>/tensorboard; needs esnb[tensorboard])")
    mlflow: str | None = option(
        None, kind="str", metavar="URI", says="off", bare=True, const="",
        help="also log to MLflow: settings, every history column, control changes, the final "
             "evaluation and the checkpoint, into URI (a folder, sqlite:///FILE or a tracking "
             "server's http(s)://, checked before the run starts; experiment: "
             "MLFLOW_EXPERIMENT_NAME or esnb; needs esnb[mlflow]). Without URI: "
             "MLFLOW_TRACKING_URI if set, else ./mlflow.db where MLflow's database store is "
             "installed (pip install mlflow), opened by mlflow ui started in the same folder; "
             "with mlflow-skinny alone, the folder ./mlruns, opened by "
             "MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri ./mlruns (MLflow 3 "
             "keeps its folder store behind that variable). The run's last line says how to "
             "open its store")
    final_eval: int = option(10, low=0, metavar="EPISODES",
                             help="noise-free episodes of the final policy (0: none)")
    video_every: int = option(0, low=0, metavar="N",
                              help="write videos/<iteration>.mp4 in the run folder every N "
                                   "iterations: an episode of the policy, rendered beside the "
                                   "run (0: none; needs esnb[video] and headless OpenGL, "
                                   "MUJOCO_GL=egl)")
    resume: str | None = option(None, kind="str", metavar="RUN", says="a new run",
                                help="continue the run in this run folder (or checkpoint "
                                     "file); live settings given beside it apply as control "
                                     "changes")
    fork: str | None = option(None, kind="str", metavar="RUN", says="none",
                              help="start a new run from RUN's kept checkpoint nearest before "
                                   "--at, settings given beside it applied as control changes; "
                                   "the new run records RUN as its parent")
    at: int | None = option(None, kind="int", low=1, metavar="N", says="none",
                            help="with --fork: the iteration to branch from")
    keep_every: int = option(0, low=0, metavar="N",
                             help="keep a checkpoint every N iterations in checkpoints/, to "
                                  "--fork from later (0: none)")
    serve: bool = option(False, help="let notebooks attach to the run (esnb.attach(name)): its "
                                     "own cluster (a LocalCluster on 127.0.0.1, or the batch "
                                     "cluster dask config esnb.cluster.type chooses) speaks TLS "
                                     "with certificates made for this run, readable by you "
                                     "only; never with --address")
    controls: str | None = option(None, kind="str", metavar="CHANGES", says="none",
                                  help="apply a recorded record of control changes (a run's "
                                       "changes.csv, or its folder) at the same iterations: a "
                                       "steered ES run replays to the same theta")

    @classmethod
    def of(cls, **values: Any) -> RunOptions:
        """Options from keywords (the rest keep their defaults), each checked; an unknown
        name is refused with the closest ones."""
        return cls.from_dict(values)


#: the options ``esnb demo`` offers (its cluster, its folder, what watches it)
DEMO = ("workers", "address", "out", "checkpoint_every", "progress", "tensorboard", "mlflow")


def add_arguments(parser: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """One flag per option of :class:`RunOptions` (``only``: those named), as the options
    declare them."""
    add_settings_arguments(parser, RunOptions, only=only, title="run options")


def options_given(args: argparse.Namespace, **values: Any) -> RunOptions:
    """The options of a parsed command line: those given, over ``values``, over the
    defaults."""
    return RunOptions.of(**{**values, **given(args, RunOptions)})
