"""``esnb train eorl``'s own flags: the algorithm (EORL or a table column) and the
environment's version, turned into the runner class and its settings.

``esnb train eorl --env bitflip --size 6 --subgoal 1 --variant EORL-ACTV --workers 0``
``esnb train eorl --env gridnav --size 12 --subgoal 2+ --stochasticity 0.1 --algorithm PER``
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from esnb.rl.constants import ENV_IDS, resolve_env
from esnb.runners.eorl.config import EORLCommand, EORLConfig, EpisodeConfig
from esnb.settings import given

#: planned episodes (and the budget) on GridNav when --episodes is not given: the paper's first
#: GridNav length (on BitFlip: the ``episodes`` setting's default, the paper's BitFlip length)
GRIDNAV_EPISODES = 1000

def env_kwargs(env: str, size: int, subgoal: str, stochasticity: float) -> dict:
    """Environment arguments from the command line's ``--size/--subgoal/--stochasticity``."""
    if resolve_env(env) == ENV_IDS["bitflip"]:
        if str(subgoal) not in ("0", "1"):
            raise ValueError(f"bitflip --subgoal must be 0 or 1, got {subgoal!r}")
        if stochasticity:
            raise ValueError("--stochasticity applies to gridnav only")
        return {"n_bits": int(size), "subgoal": str(subgoal) == "1"}
    return {"size": int(size), "subgoals": str(subgoal), "stochasticity": float(stochasticity)}


def checkpoint_algorithm(path) -> str:
    """The algorithm a checkpoint holds (read without loading anything else)."""
    from esnb.record import CheckpointError

    try:
        with np.load(path, allow_pickle=False) as z:
            doc = json.loads(z["__meta__"].tobytes().decode())
        return str(doc["algorithm"])
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path} is not an esnb checkpoint ({exc})") from exc


def adapt(args: argparse.Namespace, values: dict[str, Any]) -> tuple[type, dict[str, Any]]:
    """The runner class and settings of the command line (``Trainer.adapt``).

    ``--episodes`` is both the budget and the planned length E (default 400 on BitFlip, 1000
    on GridNav); a resumed run keeps its planned length and runs ``--episodes`` more.
    """
    from esnb.runners.eorl.runner import RUNNERS, algorithm_runner

    if args.resume:
        from esnb.record import checkpoint_of

        algorithm = checkpoint_algorithm(checkpoint_of(args.resume))
        classes = {c.algorithm: c for c in RUNNERS.values()}
        if algorithm not in classes:
            raise ValueError(f"{args.resume} holds a {algorithm!r} run, not one of "
                             f"{', '.join(classes)}")
        return classes[algorithm], values
    flags = EORLCommand.build(**given(args, EORLCommand))
    env = resolve_env(values.get("env", EORLConfig.preset_values()["env"]))
    values["env_kwargs"] = env_kwargs(env, flags.size, flags.subgoal, flags.stochasticity)
    if args.budget_episodes is None:
        args.budget_episodes = (GRIDNAV_EPISODES if env == ENV_IDS["gridnav"]
                                else EpisodeConfig.build().episodes)
    values["episodes"] = int(args.budget_episodes)
    name = flags.algorithm_name
    if name == "EORL":
        return RUNNERS["EORL"], values
    cls, named = algorithm_runner(name)
    foreign = [k for k in values if k not in cls.Config.names()]
    if foreign:
        flag_names = "/".join("--" + k.replace("_", "-") for k in foreign)
        raise ValueError(f"{flag_names} do(es) not apply to --algorithm {name}")
    if "variant" in named and values.get("variant", named["variant"]) != named["variant"]:
        raise ValueError(f"--algorithm {name} is the variant {named['variant']}: leave out "
                         f"--variant")
    return cls, {**values, **named}
