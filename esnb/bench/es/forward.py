"""ES's policy forward in lock step: :class:`~esnb.nets.batch_policy.BatchPolicy` against one
:class:`~esnb.nets.numpy_policy.NumpyPolicy` per episode, side by side.

A lock-step step of ES computes ``k`` episodes' actions, each with its own parameters. Each
round times, in turn, the stacked forward (``BatchPolicy.act`` over ``k`` rows), the same
actions one episode at a time (``k`` ``NumpyPolicy.act`` calls: what a task did before lock
step) and, with ``--compare DIR``, the stacked forward of another checkout
(``DIR/esnb/nets/batch_policy.py``, loaded beside this tree's; its imports are this tree's).
Every round checks that all of them give the same bits. Reported: microseconds per episode
step (medians over rounds) and the ratios, for the policy shapes of ES's MuJoCo tasks.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from pathlib import Path

import numpy as np

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import Session
from esnb.settings import integer

#: (task, observation size, action size): the policies ES runs on MuJoCo
SHAPES = (("HalfCheetah-v5", 17, 6), ("Ant-v5", 105, 8), ("Humanoid-v5", 348, 17))


def add_arguments(p) -> None:
    p.add_argument("--episodes", type=integer(1), nargs="+", default=[20, 5],
                   help="episodes stepped together (k; 20: a 2-worker task of population 40) "
                        "[default: 20 5]")
    p.add_argument("--steps", type=integer(1), default=2000,
                   help="lock-step steps of each kind a round [default: 2000]")
    p.add_argument("--rounds", type=integer(1), default=5,
                   help="rounds, the kinds alternating (the median is reported) [default: 5]")
    p.add_argument("--compare", default=None, metavar="DIR",
                   help="another checkout whose BatchPolicy is timed beside this tree's "
                        "[default: none]")
    add_json(p)


def _other_batch_policy(root: str):
    path = Path(root) / "esnb" / "nets" / "batch_policy.py"
    if not path.is_file():
        raise ValueError(f"--compare {root}: no {path}")
    spec = importlib.util.spec_from_file_location("_esnb_compared_batch_policy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BatchPolicy


def _time(act, obs: np.ndarray, steps: int) -> tuple[float, bytes]:
    """CPU seconds of ``steps`` calls of ``act(obs)`` and the bytes of its last actions."""
    t0 = time.process_time()
    for _ in range(steps):
        out = act(obs)
    return time.process_time() - t0, np.asarray(out).tobytes()


def measure_shape(obs_dim: int, act_dim: int, k: int, steps: int = 2000, rounds: int = 5,
                  compare: str | None = None, seed: int = 0) -> dict:
    """Microseconds per episode step of each kind (medians over ``rounds``) for ``k``
    episodes of a tanh 64-64 policy with observation normalisation, as ES's tasks run it."""
    from esnb.nets.batch_policy import BatchPolicy
    from esnb.nets.numpy_policy import NumpyPolicy
    from esnb.nets.policy import PolicySpec

    spec = PolicySpec(obs_dim, act_dim, (64, 64), low=(-1.0,) * act_dim, high=(1.0,) * act_dim)
    rng = np.random.default_rng(seed)
    mean, std = rng.standard_normal(obs_dim), rng.uniform(0.5, 2.0, obs_dim)
    params = [(rng.standard_normal(spec.num_params) * 0.3).astype(np.float32) for _ in range(k)]
    obs = rng.standard_normal((k, obs_dim)) * 3
    kinds = {"stacked": BatchPolicy}
    if compare is not None:
        kinds["compared"] = _other_batch_policy(compare)
    acts = {}
    for name, cls in kinds.items():
        batch = cls(spec, k, mean, std)
        for slot, p in enumerate(params):
            batch.load(slot, p)
        acts[name] = lambda o, b=batch: b.act(o, k)
    singles = [NumpyPolicy(spec, p, mean, std).act for p in params]
    acts["per_episode"] = lambda o: np.stack([a(o[j]) for j, a in enumerate(singles)])
    times: dict[str, list[float]] = {name: [] for name in acts}
    for _ in range(int(rounds)):
        bits = set()
        for name, act in acts.items():
            seconds, out = _time(act, obs, int(steps))
            times[name].append(seconds / (steps * k) * 1e6)
            bits.add(out)
        if len(bits) != 1:
            raise RuntimeError(f"the forwards of {obs_dim}-64-64-{act_dim} differ in their bits")
    med = {name: statistics.median(v) for name, v in times.items()}
    out = {"obs_dim": obs_dim, "act_dim": act_dim, "episodes": k, "us_per_episode_step": med,
           "all": times, "stacked_vs_per_episode": med["per_episode"] / med["stacked"]}
    if compare is not None:
        out["stacked_vs_compared"] = med["compared"] / med["stacked"]
    return out


def run(args) -> int:
    session = Session()
    rows = []
    print(f"ES's policy forward, CPU microseconds per episode step (medians of {args.rounds} "
          f"rounds of {args.steps:,} steps, kinds alternating; the same bits every round):")
    for task, obs_dim, act_dim in SHAPES:
        for k in args.episodes:
            r = measure_shape(obs_dim, act_dim, k, args.steps, args.rounds, args.compare)
            r["task"] = task
            rows.append(r)
            us = r["us_per_episode_step"]
            line = (f"  {task:15s} k={k:<3d} stacked {us['stacked']:6.2f}  per episode "
                    f"{us['per_episode']:6.2f} ({r['stacked_vs_per_episode']:.2f}x)")
            if args.compare:
                line += f"  compared tree {us['compared']:6.2f} ({r['stacked_vs_compared']:.2f}x)"
            print(line)
    return session.done(args, rows, rerun="esnb bench forward")
