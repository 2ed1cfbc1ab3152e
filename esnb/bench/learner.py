"""Learner throughput on one device: updates/s and samples/s of each torch learner on its
paper-sized network and batch, so that one command compares a GPU machine with this one.

Cases (``--cases``), each the learner's own update on batches made once (random, the dtype and
shape the replay or the actors hand it; the batch's move to the device is part of the update,
as in a run):

- ``apex-dqn``: Ape-X DQN (Horgan et al. 2018): the Nature DQN torso with dueling heads of 512
  over 4x84x84 uint8 frames, 18 actions, batch 512, double Q-learning, centred RMSProp;
- ``impala``: IMPALA (Espeholt et al. 2018): its deep residual torso over 4x84x84 frames, 18
  actions, a batch of 32 unrolls of 20 steps, V-trace, the `paper` preset's optimiser
  (RMSProp with TensorFlow's semantics) and loss;
- ``impala-shallow``: the learner of IMPALA's laptop preset on Atari (what Pong runs here): the
  paper's shallow torso (two convolutions and a layer of 256) over the preset's frames (4x84x84),
  6 actions (Pong's), the preset's batch (32 unrolls of 20 steps), Adam;
- ``impala-shallow-42``: the same learner over frames of 42x42 (``env_kwargs`` screen_size 42,
  RLlib's tuned fast Pong's): ``--cases impala-shallow impala-shallow-42`` compares them;
- ``td3``: the TD3 learner of AES-RL/CEM-RL (Fujimoto et al. 2018 as AES-RL's App. A sizes
  it): twin critic and actor of 256-256 on HalfCheetah's 17/6 dimensions, batch 256, one
  ``td3_step`` (critic update, and every second one the actor's) per update.

Rounds alternate between the cases (the machine is shared and noisy) and each figure is the
median over rounds. ``--layout both`` measures every case with the convolutions in the
channels-last layout (what runs use) and in torch's default one, in the same rounds, and prints
the ratio. With a CUDA ``--device`` the CPU is measured in the same rounds and the
ratio device/CPU printed; nothing here reports a GPU figure that no GPU produced: the device a
line names is the one torch ran it on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import Session
from esnb.settings import integer

#: Atari's full action set (ALE's 18 actions)
ATARI_ACTIONS = 18
FRAMES = (4, 84, 84)


@dataclass
class Case:
    """One learner at its paper's size: ``make(device, seed)`` returns ``(update, about)``,
    ``update()`` doing one learner update; ``samples`` is what one update consumes."""

    name: str
    network: str
    batch: str
    samples: int
    make: Callable[[Any, int], Callable[[], Any]]


def _apex_dqn(device, seed: int):
    from esnb.nets.conv import ConvTorso
    from esnb.rl.apex.dqn import DQNLearner, QNetSpec

    torso = ConvTorso("nature", FRAMES)
    spec = QNetSpec(obs_dim=int(np.prod(FRAMES)), n_actions=ATARI_ACTIONS, hidden=(512,),
                    dueling=True, torso=torso)
    learner = DQNLearner(spec, lr=0.00025 / 4, grad_clip=40.0, target_period=2500,
                         loss="mse", double=True, optimizer="rmsprop_centered", seed=seed,
                         device=device)
    rng = np.random.default_rng(seed)
    n = 512
    batch = {"obs": rng.integers(0, 256, (n, *FRAMES), dtype=np.uint8),
             "next_obs": rng.integers(0, 256, (n, *FRAMES), dtype=np.uint8),
             "action": rng.integers(0, ATARI_ACTIONS, n),
             "reward": rng.uniform(-1, 1, n).astype(np.float32),
             "discount": np.full(n, 0.99 ** 3, np.float32)}
    weights = rng.uniform(0.1, 1.0, n).astype(np.float32)
    return lambda: learner.update(batch, weights)


def _laptop_atari() -> tuple[int, int, tuple[int, int, int]]:
    """Unroll length, unrolls per batch and frame shape of IMPALA's laptop preset on Atari."""
    from esnb.runners.impala.config import ImpalaConfig

    laptop = ImpalaConfig.build(env="ALE/Pong-v5")
    side = int(laptop.env_kwargs.get("screen_size", FRAMES[-1]))
    return laptop.unroll_length, laptop.batch_size, (FRAMES[0], side, side)


def _impala(device, seed: int, T: int = 20, B: int = 32,  # noqa: N803 - the paper's names
            preset: str = "paper", torso: str = "impala-deep", actions: int = ATARI_ACTIONS,
            frames: tuple[int, int, int] = FRAMES):
    import gymnasium as gym

    from esnb.nets.conv import ConvTorso
    from esnb.rl.impala.actor_critic import ActorCriticSpec, init_actor_critic
    from esnb.rl.impala.learner import ImpalaLearner, LossConfig
    from esnb.rl.impala.unrolls import UnrollBatch
    from esnb.runners.impala.config import ImpalaConfig

    obs_space = gym.spaces.Box(0, 255, frames, np.uint8)
    # the loss's and optimiser's values (the preset on an Atari id: its Atari values)
    paper = ImpalaConfig.build(preset, env="ALE/Pong-v5")
    spec = ActorCriticSpec.for_spaces(obs_space, gym.spaces.Discrete(actions),
                                      paper.hidden, paper.activation, paper.init_log_std,
                                      torso=ConvTorso(torso, frames))
    rng = np.random.default_rng(seed)
    learner = ImpalaLearner(spec, init_actor_critic(spec, rng), lr=paper.lr,
                            optimizer=paper.optimizer, obs_norm=False,
                            rmsprop_eps=paper.rmsprop_eps, rmsprop_decay=paper.rmsprop_decay,
                            device=device)
    none = np.zeros(0, np.int64)
    batch = UnrollBatch(
        obs=rng.integers(0, 256, (T + 1, B, int(np.prod(frames))), dtype=np.uint8),
        actions=rng.integers(0, actions, (T, B)),
        rewards=rng.uniform(-1, 1, (T, B)).astype(np.float32),
        terminated=np.zeros((T, B), bool), truncated=np.zeros((T, B), bool),
        behaviour_log_probs=np.full((T, B), -np.log(actions), np.float32),
        trunc_t=none, trunc_b=none, trunc_obs=np.zeros((0, int(np.prod(frames))), np.uint8),
        versions=np.zeros(B, np.int64))
    cfg = LossConfig.of(paper)
    return lambda: learner.step(batch, cfg, paper.lr)


def _td3(device, seed: int):
    from esnb.rl.td3.actor import actor_spec
    from esnb.rl.td3.config import FIXED, TD3Config
    from esnb.rl.td3.learner import CriticLearner

    obs_dim, act_dim, n = 17, 6, 256  # HalfCheetah-v5
    hidden = (256, 256)
    spec = actor_spec(obs_dim, act_dim, -np.ones(act_dim), np.ones(act_dim), hidden)
    config = TD3Config(actor_hidden=hidden, critic_hidden=hidden, batch_size=n,
                       actor_lr=3e-4, critic_lr=3e-4, gamma=0.99, tau=0.005,
                       policy_noise=0.2, noise_clip=0.5, device=str(device), **FIXED)
    learner = CriticLearner(spec, config, seed=seed)
    rng = np.random.default_rng(seed)
    batch = {"obs": rng.standard_normal((n, obs_dim), dtype=np.float32),
             "action": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
             "reward": rng.standard_normal(n, dtype=np.float32),
             "next_obs": rng.standard_normal((n, obs_dim), dtype=np.float32),
             "done": (rng.random(n) < 0.01).astype(np.float32)}
    return lambda: learner.td3_step(batch)


LAPTOP_T, LAPTOP_B, LAPTOP_FRAMES = _laptop_atari()
CASES = {
    "apex-dqn": Case("apex-dqn", "Nature conv + dueling 512", "512 transitions", 512,
                     _apex_dqn),
    "impala": Case("impala", "deep residual conv (15 layers)", "32 unrolls x 20", 640,
                   _impala),
    "impala-shallow": Case("impala-shallow", "shallow conv + 256, 84x84 (laptop preset)",
                           f"{LAPTOP_B} unrolls x {LAPTOP_T}", LAPTOP_B * LAPTOP_T,
                           lambda device, seed: _impala(device, seed, LAPTOP_T, LAPTOP_B,
                                                        preset="laptop", torso="impala-shallow",
                                                        actions=6, frames=LAPTOP_FRAMES)),
    "impala-shallow-42": Case("impala-shallow-42", "shallow conv + 256, 42x42",
                              f"{LAPTOP_B} unrolls x {LAPTOP_T}",
                              LAPTOP_B * LAPTOP_T,
                              lambda device, seed: _impala(device, seed, LAPTOP_T, LAPTOP_B,
                                                           preset="laptop",
                                                           torso="impala-shallow", actions=6,
                                                           frames=(FRAMES[0], 42, 42))),
    "td3": Case("td3", "twin critic + actor 256-256", "256 transitions", 256, _td3),
}


def add_arguments(p) -> None:
    p.add_argument("--device", default="auto",
                   help="where the learners compute: auto (CUDA when torch sees one), cpu, "
                        "cuda or cuda:N (default: auto)")
    p.add_argument("--cases", nargs="+", choices=sorted(CASES), default=sorted(CASES),
                   help="learners to measure (default: all)")
    p.add_argument("--updates", type=integer(1), default=10,
                   help="timed updates per case and round (after 2 warm-up ones)")
    p.add_argument("--repeats", type=integer(1), default=3, help="rounds, each measuring all")
    p.add_argument("--seed", type=integer(0), default=0, help="seeds networks and batches")
    p.add_argument("--layout", choices=("channels-last", "contiguous", "both"),
                   default="channels-last",
                   help="memory layout of the convolutions: channels-last (what runs use), "
                        "torch's default contiguous one, or both in the same rounds with their "
                        "ratio (default: channels-last)")
    add_json(p)


def _sync(device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def measure(cases: list[str], device: str = "auto", updates: int = 10, repeats: int = 3,
            seed: int = 0, layouts: tuple[str, ...] = ("channels-last",)) -> dict[str, Any]:
    """Seconds per update of each case (median over ``repeats`` interleaved rounds) on
    ``device`` and, when it is not the CPU, on the CPU in the same rounds; each in every memory
    layout of ``layouts`` (keys of :data:`esnb.nets.torch_conv.LAYOUTS`).

    Raises
    ------
    ValueError
        An unknown case, or a device this process cannot use (one line, as the settings say
        it).
    """
    import torch

    from esnb.device import resolve_device
    from esnb.nets.torch_conv import LAYOUTS, memory_layout

    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise ValueError(f"unknown learner case(s) {unknown}; known: {', '.join(CASES)}")
    wrong = sorted(set(layouts) - set(LAYOUTS))
    if wrong or not layouts:
        raise ValueError(f"unknown memory layout(s) {wrong or layouts}; known: "
                         f"{', '.join(LAYOUTS)}")
    dev = resolve_device(device)
    devices = [dev] if dev.type == "cpu" else [dev, torch.device("cpu")]
    updates_of = {(c, str(d), layout): CASES[c].make(d, seed)
                  for c in cases for d in devices for layout in layouts}
    times: dict[tuple[str, str, str], list[float]] = {key: [] for key in updates_of}
    for (_, _, layout), update in updates_of.items():  # warm-up: allocations, kernels chosen
        with memory_layout(layout):
            for _ in range(2):
                update()
    for _ in range(repeats):
        for (name, where, layout), update in updates_of.items():
            d = torch.device(where)
            with memory_layout(layout):
                _sync(d)
                t0 = time.perf_counter()
                for _ in range(updates):
                    update()
                _sync(d)
            times[(name, where, layout)].append((time.perf_counter() - t0) / updates)
    rows = []
    for (name, where, layout), ts in times.items():
        s = float(np.median(ts))
        case = CASES[name]
        rows.append({"case": name, "device": where, "layout": layout,
                     "network": case.network, "batch": case.batch, "seconds_per_update": s,
                     "updates_per_s": 1.0 / s, "samples_per_s": case.samples / s})
    return {"device": str(dev), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "updates": updates, "repeats": repeats,
            "rows": rows}


def run(args) -> int:
    session = Session()
    layouts = ("channels-last", "contiguous") if args.layout == "both" else (args.layout,)
    r = measure(args.cases, args.device, args.updates, args.repeats, args.seed, layouts)
    print()
    print(f"learner updates on {r['device']} (torch {r['torch']}, {r['torch_threads']} CPU "
          f"threads): median of {r['repeats']} interleaved rounds of {r['updates']} updates")
    wc = max(len("learner"), *(len(row["case"]) for row in r["rows"])) + 2
    wn = max(len("network"), *(len(row["network"]) for row in r["rows"])) + 2
    print(f"  {'learner':<{wc}}{'network':<{wn}}{'batch':<17}{'device':<8}{'layout':<15}"
          f"{'updates/s':>10}{'samples/s':>11}{'ms/update':>11}")
    by = {(row["case"], row["device"], row["layout"]): row for row in r["rows"]}
    for row in r["rows"]:
        print(f"  {row['case']:<{wc}}{row['network']:<{wn}}{row['batch']:<17}{row['device']:<8}"
              f"{row['layout']:<15}{row['updates_per_s']:>10.2f}"
              f"{row['samples_per_s']:>11,.0f}{1000 * row['seconds_per_update']:>11.1f}")
    for name in args.cases:
        for layout in layouts:
            if r["device"] != "cpu":
                ratio = (by[(name, r["device"], layout)]["updates_per_s"]
                         / by[(name, "cpu", layout)]["updates_per_s"])
                print(f"  {name} ({layout}): {r['device']} / cpu = {ratio:.1f}x")
        if len(layouts) == 2:
            for where in dict.fromkeys(row["device"] for row in r["rows"]):
                ratio = (by[(name, where, "channels-last")]["updates_per_s"]
                         / by[(name, where, "contiguous")]["updates_per_s"])
                print(f"  {name} on {where}: channels-last / contiguous = {ratio:.2f}x")
    if {"impala-shallow", "impala-shallow-42"} <= set(args.cases):
        for where in dict.fromkeys(row["device"] for row in r["rows"]):
            ratio = (by[("impala-shallow-42", where, layouts[0])]["updates_per_s"]
                     / by[("impala-shallow", where, layouts[0])]["updates_per_s"])
            print(f"  the shallow learner on {where}: 42x42 / 84x84 frames = {ratio:.2f}x")
    return session.done(args, r, rerun="esnb bench learner")
