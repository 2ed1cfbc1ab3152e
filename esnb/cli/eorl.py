"""EORL and its baselines on BitFlip / GridNav (``esnb.EORL``, Khadilkar 2023).

``esnb train eorl --env bitflip --size 6 --subgoal 1 --variant EORL-ACTV --workers 0``
``esnb train eorl --env gridnav --size 12 --subgoal 2+ --stochasticity 0.1 --algorithm PER``
"""

from __future__ import annotations

import json

import numpy as np


def add_arguments(p) -> None:
    from esnb.runners.eorl import ALGORITHMS

    p.add_argument("--algorithm", default="EORL", choices=["EORL", *ALGORITHMS],
                   help="EORL (with --variant or --kappa/--mu/--schedule) or a table column")
    p.add_argument("--variant", default=None,
                   help="EORL-FIX, EORL-05-00, EORL-05-05, EORL-10-05 or EORL-ACTV")
    p.add_argument("--kappa", type=float, default=None, help="crossover rate in [0, 1]")
    p.add_argument("--mu", type=float, default=None, help="mutation rate in [0, 1]")
    p.add_argument("--schedule", default=None, help="uniform or active")
    p.add_argument("--n", type=int, default=8, help="population size (EORL, CEM-RL)")
    p.add_argument("--episodes", type=int, default=None,
                   help="episodes E (default 400 on bitflip, 1000 on gridnav)")
    p.add_argument("--size", type=int, default=6, help="bits (bitflip) or grid side (gridnav)")
    p.add_argument("--subgoal", default="0",
                   help="bitflip: 0 or 1; gridnav: 0, 1, 2+ or 2-")
    p.add_argument("--stochasticity", type=float, default=0.0, help="gridnav only")
    p.add_argument("--eps-decay", type=float, default=None,
                   help="epsilon multiplier per episode (default: the paper's)")
    p.add_argument("--minibatch", type=int, default=None,
                   help="mini-batch size (default: one full-batch step per pass)")


def env_kwargs(env: str, size: int, subgoal: str, stochasticity: float) -> dict:
    """Environment arguments from the command line's ``--size/--subgoal/--stochasticity``."""
    from esnb.rl.eorl_learners import ENV_IDS, resolve_env

    env_id = resolve_env(env)
    if env_id == ENV_IDS["bitflip"]:
        if str(subgoal) not in ("0", "1"):
            raise ValueError(f"bitflip --subgoal must be 0 or 1, got {subgoal!r}")
        if stochasticity:
            raise ValueError("--stochasticity applies to gridnav only")
        return {"n_bits": int(size), "subgoal": str(subgoal) == "1"}
    return {"size": int(size), "subgoals": str(subgoal), "stochasticity": float(stochasticity)}


def make_runner(args, client):
    from esnb.rl.eorl_learners import ENV_IDS, resolve_env
    from esnb.runners.eorl import EORL
    from esnb.runners.eorl import make_runner as make

    kw = env_kwargs(args.env, args.size, args.subgoal, args.stochasticity)
    episodes = args.episodes or (400 if resolve_env(args.env) == ENV_IDS["bitflip"] else 1000)
    common = dict(eps_decay=args.eps_decay, minibatch=args.minibatch, name=args.name)
    if args.algorithm == "EORL":
        return EORL(args.env, kw, episodes, args.seed, client, variant=args.variant,
                    kappa=args.kappa, mu=args.mu, schedule=args.schedule, n=args.n, **common)
    if any(v is not None for v in (args.variant, args.kappa, args.mu, args.schedule)):
        raise ValueError("--variant/--kappa/--mu/--schedule apply to --algorithm EORL only")
    extra = {"n": args.n} if args.algorithm == "CEM-RL" else {}
    return make(args.algorithm, args.env, kw, episodes, args.seed, **extra, **common)


def checkpoint_algorithm(path) -> str:
    """The algorithm a checkpoint holds (read without loading anything else)."""
    from esnb.record import CheckpointError

    try:
        with np.load(path, allow_pickle=False) as z:
            doc = json.loads(z["__meta__"].tobytes().decode())
        return str(doc["algorithm"])
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path} is not an esnb checkpoint ({exc})") from exc


def load_runner(path, client):
    from esnb.runners.eorl import CBE, EORL, HER, PER, VAN, CEMRLRoundRobin

    classes = {c.algorithm: c for c in (EORL, VAN, PER, HER, CBE, CEMRLRoundRobin)}
    algorithm = checkpoint_algorithm(path)
    if algorithm not in classes:
        raise ValueError(f"{path} holds a {algorithm!r} run, not one of {', '.join(classes)}")
    return classes[algorithm].load(path, client=client)


def budget(args) -> dict:
    from esnb.rl.eorl_learners import ENV_IDS, resolve_env

    episodes = args.episodes or (400 if resolve_env(args.env) == ENV_IDS["bitflip"] else 1000)
    return {"episodes": episodes}
