"""Atari agent steps: esnb's :class:`~esnb.envs.atari_frames.AtariFrames` against gymnasium's
``AtariPreprocessing`` + ``FrameStackObservation``, and the emulator alone, side by side.

Each round steps the same seeded actions through the three, in turn, for ``--steps`` agent
steps (episodes reset as they end, from the same seeds): esnb's wrapper and gymnasium's chain
(what esnb used before), whose observations must be the same bits (a SHA-256 of all of them is
compared every round), and the 4 emulator frames of each step alone (``ale.act``, no screen
read): the floor any preprocessing sits on. CPU seconds per agent step (this process's), the
median over rounds, the ratio, and each as a multiple of the emulator's.
"""

from __future__ import annotations

import hashlib
import statistics
import time

import numpy as np

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import Session
from esnb.settings import integer

#: what each round times, in the order it runs them
KINDS = ("esnb", "gymnasium", "emulator")


def add_arguments(p) -> None:
    p.add_argument("--env", default="ALE/Pong-v5", help="an ALE id [default: ALE/Pong-v5]")
    p.add_argument("--steps", type=integer(1), default=2000,
                   help="agent steps of each kind a round [default: 2000]")
    p.add_argument("--rounds", type=integer(1), default=5,
                   help="rounds, the kinds alternating (the median is reported) [default: 5]")
    add_json(p)


def _gymnasium_chain(env_id: str):
    import gymnasium as gym

    from esnb.envs.atari_frames import FRAME_SKIP, NOOP_MAX, SCREEN_SIZE, STACK

    env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0,
                   disable_env_checker=True)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=NOOP_MAX, frame_skip=FRAME_SKIP,
                                          screen_size=SCREEN_SIZE, grayscale_obs=True,
                                          scale_obs=False)
    return gym.wrappers.FrameStackObservation(env, STACK)


def _play(env, actions: np.ndarray) -> tuple[float, str]:
    """CPU seconds to step ``actions`` (new games from seeds 0, 1, ... as games end) and the
    SHA-256 of every observation."""
    digest = hashlib.sha256()
    game = 0
    obs, _ = env.reset(seed=game)
    t0 = time.process_time()
    for a in actions.tolist():
        obs, _, terminated, truncated, _ = env.step(a)
        digest.update(obs)
        if terminated or truncated:
            game += 1
            obs, _ = env.reset(seed=game)
    return time.process_time() - t0, digest.hexdigest()


def _emulate(ale, codes: np.ndarray, frame_skip: int) -> float:
    """CPU seconds of the emulator alone: ``frame_skip`` frames a step, no screen read."""
    t0 = time.process_time()
    for code in codes.tolist():
        for _ in range(frame_skip):
            ale.act(code, 1.0)
        if ale.game_over():
            ale.reset_game()
    return time.process_time() - t0


def measure(env_id: str = "ALE/Pong-v5", steps: int = 2000, rounds: int = 5,
            seed: int = 0) -> dict:
    """Seconds per agent step of each kind (medians over ``rounds``) and their ratios."""
    from esnb.envs.atari_frames import FRAME_SKIP
    from esnb.envs.make import make_env

    ours, theirs = make_env(env_id), _gymnasium_chain(env_id)
    base = ours.unwrapped
    actions = np.random.default_rng(seed).integers(0, ours.action_space.n, int(steps))
    codes = np.asarray(base._action_set)[actions]
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    try:
        for _ in range(int(rounds)):
            t_ours, h_ours = _play(ours, actions)
            t_theirs, h_theirs = _play(theirs, actions)
            if h_ours != h_theirs:
                raise RuntimeError(f"{env_id}: esnb's frames differ from gymnasium's wrappers'")
            times["esnb"].append(t_ours / steps)
            times["gymnasium"].append(t_theirs / steps)
            times["emulator"].append(_emulate(base.ale, codes, FRAME_SKIP) / steps)
    finally:
        ours.close()
        theirs.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"env": env_id, "steps": int(steps), "rounds": int(rounds), "seconds": med,
            "all": times, "speedup": med["gymnasium"] / med["esnb"],
            "over_emulator": {k: med[k] / med["emulator"] for k in ("esnb", "gymnasium")}}


def run(args) -> int:
    session = Session()
    r = measure(args.env, args.steps, args.rounds)
    s, over = r["seconds"], r["over_emulator"]
    print(f"{r['env']}: CPU per agent step (4 emulator frames), median of {r['rounds']} rounds "
          f"of {r['steps']:,} steps each, alternating; the frames equal bit for bit:")
    print(f"  esnb AtariFrames                       {s['esnb'] * 1e3:.3f} ms "
          f"({over['esnb']:.2f}x the emulator)")
    print(f"  gymnasium AtariPreprocessing + stack   {s['gymnasium'] * 1e3:.3f} ms "
          f"({over['gymnasium']:.2f}x the emulator)")
    print(f"  the emulator alone (ale.act x 4)       {s['emulator'] * 1e3:.3f} ms")
    print(f"  esnb {r['speedup']:.2f}x gymnasium's steps per CPU second")
    return session.done(args, r, rerun=f"esnb bench atari-frames --env {r['env']}")
