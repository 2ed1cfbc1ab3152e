"""The learners' option names and the constants no setting varies, importable without torch.

The configs offer the option names as choices and the CLI lists them without loading torch.
Settings' defaults are not here: each is written once, in its config's ``setting(...)``.
"""

from __future__ import annotations

# -- Ape-X DQN (Horgan et al. 2018) -----------------------------------------------------------
#: per-item losses of the DQN learner (``mse`` is the paper's 1/2 delta^2)
DQN_LOSSES = ("huber", "mse")
#: optimizers of the DQN learner (``rmsprop_centered``: the paper's, TensorFlow semantics)
DQN_OPTIMIZERS = ("adam", "rmsprop_centered")
#: reward clippings of Ape-X's actors (IMPALA's names): ``abs_one`` clips each reward to
#: [-1, 1] as DQN does on Atari (Mnih et al. 2015), which Ape-X follows
APEX_REWARD_CLIPPINGS = ("none", "abs_one")
#: the Ape-X paper's centred RMSProp (appendix C: decay 0.95, epsilon 1.5e-7, no momentum)
PAPER_RMSPROP = dict(decay=0.95, eps=1.5e-7, momentum=0.0)

# -- IMPALA (Espeholt et al. 2018) ------------------------------------------------------------
CORRECTIONS = ("vtrace", "none")
IMPALA_OPTIMIZERS = ("adam", "rmsprop", "rmsprop_tf")
#: how rewards are clipped before they enter V-trace (google-deepmind/scalable_agent's
#: ``--reward_clipping``: ``abs_one`` is the paper's clip to [-1, 1], the code's default)
REWARD_CLIPPINGS = ("none", "abs_one", "soft_asymmetric")

# -- EORL (Khadilkar 2023) and its baselines --------------------------------------------------
#: short names of EORL's environments
ENV_IDS = {"bitflip": "esnb/BitFlip-v0", "gridnav": "esnb/GridNav-v0"}
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-7
#: the paper's Table 3: GridNav episodes -> epsilon decay per episode
GRIDNAV_DECAY = {1000: 0.995, 2500: 0.998, 4000: 0.999}
BITFLIP_DECAY = 0.99
PER_EPS = 1e-6


def resolve_env(env: str) -> str:
    """The gymnasium id of ``"bitflip"``, ``"gridnav"`` or one of the two ids."""
    if env in ENV_IDS:
        return ENV_IDS[env]
    if env in ENV_IDS.values():
        return env
    valid = ", ".join(map(repr, [*ENV_IDS, *ENV_IDS.values()]))
    raise ValueError(f"unknown EORL environment {env!r}; valid: {valid}")
