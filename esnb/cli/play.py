"""``esnb play RUN`` (evaluate a run's policy, optionally as a video) and ``esnb export RUN``
(its policy as an ONNX or TorchScript file); see :mod:`esnb.runners.playback`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from esnb.settings import integer

PLAY_DESCRIPTION = """Evaluate a run's policy: its checkpoint (in the run folder RUN, or a
checkpoint file) is loaded in this process and its noise-free episodes run with the seeds the
run's evaluation draws next. On a run folder written by esnb train with the same number of
episodes as its final evaluation, the returns are that evaluation's."""

EXPORT_DESCRIPTION = """Write a run's policy as one standalone file, observation
normalisation and action head included: ONNX (onnxruntime, needs esnb[export]) or TorchScript
(torch.jit.load). Input obs: float32 [batch, obs_dim]; output action: float32 [batch, act_dim]
(int64 [batch] for discrete actions). ES, AES-RL, CEM-RL and IMPALA runs have such a policy."""


def add_play_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help="a run folder (runs/<name>) or checkpoint file")
    p.add_argument("--episodes", type=integer(1), default=None, metavar="N",
                   help="episodes to run (default: as many as the run's final evaluation, "
                        "else 10)")
    p.add_argument("--video", default=None, metavar="FILE",
                   help="also write a video of one episode (seed 0) to FILE, .mp4 or .gif "
                        "(needs esnb[video] and headless OpenGL, MUJOCO_GL=egl) [default: none]")
    p.add_argument("--json", action="store_true",
                   help="print the result as JSON (default: one line)")


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    from esnb.nets.acting import FORMATS

    p.add_argument("run", metavar="RUN", help="a run folder (runs/<name>) or checkpoint file")
    p.add_argument("--format", choices=FORMATS, default="onnx",
                   help="file format (default: onnx)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="where to write (default: policy.onnx or policy.pt beside the "
                        "checkpoint)")


def run_play(args) -> int:
    from esnb.runners.playback import final_evaluation, load_run, play

    final = final_evaluation(args.run)
    episodes = args.episodes or (final["episodes"] if final else 10)
    if args.video:
        from esnb.views.video import check_video_path

        check_video_path(args.video)
    runner = load_run(args.run)
    result = play(runner, episodes)
    doc = {"algorithm": runner.algorithm, "run": str(args.run),
           runner.iteration_column: runner.iteration, "episodes": result["episodes"],
           "mean": result["mean"], "std": result["std"],
           "returns": [float(r) for r in result["returns"]]}
    if final is not None:
        doc["final_evaluation"] = final
    if args.video:
        video = runner.video(episodes=1, seed=0)
        video.save(args.video)
        doc["video"] = {"file": str(args.video), "return": float(video.returns[0]),
                        "frames": video.shape[0]}
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    line = (f"{runner.algorithm} {args.run} at {runner.iteration_column} {runner.iteration:,}: "
            f"return {result['mean']:,.2f} ± {result['std']:,.2f} over {episodes} episodes")
    if final is not None:
        line += (f" (the run's final evaluation: {final['mean']:,.2f} ± {final['std']:,.2f} "
                 f"over {final['episodes']})")
    print(line)
    if args.video:
        print(f"video: {args.video} ({doc['video']['frames']} frames, return "
              f"{doc['video']['return']:,.2f})")
    return 0


def run_export(args) -> int:
    from esnb.destinations import check_file
    from esnb.nets.acting import SUFFIXES
    from esnb.record import checkpoint_of
    from esnb.runners.playback import export, load_run

    path = checkpoint_of(args.run)
    out = Path(args.out) if args.out else path.parent / f"policy{SUFFIXES[args.format]}"
    check_file(out, "--out" if args.out else "the policy file",
               f"policy{SUFFIXES[args.format]}")  # before the checkpoint is loaded
    runner = load_run(path)
    export(runner, args.format, out)
    print(f"{runner.algorithm} policy ({runner.iteration_column} {runner.iteration:,}) written "
          f"to {out} ({args.format})")
    return 0
