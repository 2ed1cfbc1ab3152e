"""What watches a run and how it ends: the trackers (``tensorboard``, ``mlflow``), the videos
(``video_every``), and the run folder written once the run has ended."""

from __future__ import annotations

import json
import time
from pathlib import Path

from esnb.session.options import RunOptions


def finish(runner, final_eval: int, started: float, folder: Path, evaluate: bool = True,
           say: bool = True) -> dict:
    """Evaluate the final policy (unless ``evaluate`` is False: interrupted), write the run
    folder, print a summary (``say``)."""
    from esnb.record import strict, write_run_folder

    summary = {"wall_time_total": None}
    evaluating = evaluate and hasattr(runner, "evaluate") and final_eval > 0
    if evaluating:
        # the run folder's checkpoint is the state before the evaluation: `esnb play` loads it
        # and its evaluation generator draws the same episode seeds
        runner.save(folder / "checkpoint.npz")
        returns = runner.evaluate_final(final_eval)  # kept on the runner: plot.html marks it
        summary.update(final_eval_mean=float(returns.mean()), final_eval_std=float(returns.std()),
                       final_eval_episodes=int(len(returns)))
    summary["wall_time_total"] = time.perf_counter() - started
    write_run_folder(runner, folder, summary, checkpoint=not evaluating)
    if evaluate and say:
        print(json.dumps(strict(summary), indent=2, allow_nan=False))
        print(f"run folder: {folder}")
    return summary


def tensorboard_dir(options: RunOptions, folder: Path) -> Path | None:
    """Where ``tensorboard`` writes (None: not asked), once the extra is known installed."""
    if options.tensorboard is None:
        return None
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise ValueError("--tensorboard needs the tensorboard package: "
                         "pip install 'esnb[tensorboard]'") from None
    return Path(options.tensorboard) if options.tensorboard else folder / "tensorboard"


def check_mlflow(options: RunOptions) -> None:
    """``mlflow``'s extra is installed and its store answers (before any cluster starts)."""
    if options.mlflow is None:
        return
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise ValueError("--mlflow needs the mlflow-skinny (or mlflow) package: "
                         "pip install 'esnb[mlflow]'") from None
    from esnb.views.mlflow_tracker import check_destination

    check_destination(options.mlflow or None, "--mlflow")


def check_trackers(options: RunOptions) -> None:
    """The trackers' extras installed and their destinations usable, before the run's
    folder is made or any cluster starts: ``--tensorboard DIR`` a folder that can be written
    (its default, in the run folder, is checked with the folder), ``--mlflow URI`` a store
    that takes runs (a writable folder, a server answering within seconds, a known scheme)."""
    from esnb.destinations import check_folder

    tensorboard_dir(options, Path())  # the extra installed
    if options.tensorboard:
        check_folder(options.tensorboard, "--tensorboard")
    check_mlflow(options)


def start_trackers(runner, options: RunOptions, board_dir: Path | None) -> list:
    """The trackers asked for (``tensorboard``, ``mlflow``), attached to ``runner``."""
    trackers = []
    if board_dir is not None:
        from esnb.views.tensorboard import TensorBoard

        # a resumed folder's event files hold the rows up to the resume already
        trackers.append(TensorBoard(runner, board_dir,
                                    history=not any(board_dir.glob("events.out.tfevents.*"))))
    if options.mlflow is not None:
        from esnb.views.mlflow_tracker import MLflow, first_line

        try:
            trackers.append(MLflow(runner, options.mlflow or None))  # a resume: a new run
        except Exception as exc:  # noqa: BLE001 - the store failed after its checks passed
            for tracker in trackers:
                tracker.close(failed=True)
            flag = f"--mlflow {options.mlflow}" if options.mlflow else "--mlflow"
            raise ValueError(f"{flag}: MLflow failed: {first_line(exc)}") from None
    return trackers


def tracker_lines(trackers: list) -> list[str]:
    """What a run's end says of its trackers: how to open its MLflow store."""
    return [f"esnb: MLflow run {t.run_id}: {t.open_with}" for t in trackers
            if getattr(t, "open_with", None)]


def start_videos(runner, options: RunOptions, folder: Path):
    """``video_every``: a :class:`~esnb.views.video.VideoRecorder` (None: not asked), once
    the runner is known to have a policy to render and this machine to render its env."""
    if not options.video_every:
        return None
    from esnb.views.video import VideoRecorder, probe

    runner.acting_policy()  # or one line: what the algorithm holds instead
    probe(runner.config.env, getattr(runner.config, "env_kwargs", None))
    return VideoRecorder(runner, folder / "videos", options.video_every)


def close_videos(videos) -> None:
    """Wait for the videos in progress; say how many could not be written."""
    import sys

    if videos is None:
        return
    videos.close()
    if videos.failed:
        print(f"esnb: {len(videos.failed)} video(s) not written, the first: "
              f"{videos.failed[0]}", file=sys.stderr)
