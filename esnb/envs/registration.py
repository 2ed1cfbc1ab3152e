"""Registers esnb's own gymnasium environments (imported by ``make_env``).

``gymnasium.make("esnb/BitFlip-v0", n_bits=6, subgoal=True)`` and
``gymnasium.make("esnb/GridNav-v0", size=12, subgoals="2+", stochasticity=0.1)``. Both keep
their own timeout (it depends on their size), so no ``max_episode_steps`` is registered.
"""

from __future__ import annotations

import gymnasium as gym

_ENVS = {
    "esnb/BitFlip-v0": "esnb.envs.bitflip:BitFlipEnv",
    "esnb/GridNav-v0": "esnb.envs.gridnav:GridNavEnv",
}

for _id, _entry in _ENVS.items():
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_entry)
