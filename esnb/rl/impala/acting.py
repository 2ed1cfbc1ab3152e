"""IMPALA's greedy policy on frames as plain data: what a video of an Atari run plays.

:class:`FramePolicy` is the frames' counterpart of :class:`~esnb.nets.acting.ActingPolicy`
(which holds MLP policies): an :class:`~esnb.rl.impala.actor_critic.ActorCriticSpec` with a
conv torso and the actors' flat parameters. :meth:`FramePolicy.numpy` gives ``act(obs)`` for
one observation: the action the run's greedy evaluations take
(:meth:`~esnb.rl.impala.actor_critic.NumpyActor.greedy`: torch's forward of the same vector,
the argmax of the logits). It pickles to the rendering process as arrays and the spec; torch is
imported there when it first acts. ``runner.video()``, ``esnb play RUN --video``, the
dashboard's record button and ``--video-every`` take it; ``esnb export`` writes MLP policies
only and says so (:attr:`FramePolicy.not_exported`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from esnb.rl.impala.actor_critic import ActorCriticSpec, NumpyActor


@dataclass(frozen=True, eq=False)
class FramePolicy:
    """A greedy actor-critic policy over frames.

    Attributes
    ----------
    spec : ActorCriticSpec
        The network, its torso a :class:`~esnb.nets.conv.ConvTorso`.
    flat : ndarray of float32
        The actors' parameters (``spec.actor_layout``: torso, shared layer, policy head).
    env : str
        The environment it was trained on (what the refusal to export names).
    """

    spec: ActorCriticSpec
    flat: np.ndarray
    env: str = ""

    def __post_init__(self):
        if self.spec.torso is None:
            raise ValueError("a FramePolicy takes a network with a conv torso; MLP policies "
                             "are ActingPolicy (esnb.nets.acting)")
        n = self.spec.actor_layout.num_params
        flat = np.array(self.flat, dtype=np.float32)
        if flat.shape != (n,):
            raise ValueError(f"actor parameters must have shape ({n},), got {flat.shape}")
        object.__setattr__(self, "flat", flat)

    @property
    def not_exported(self) -> str:
        """Why ``esnb export`` does not write it (one line)."""
        return (f"IMPALA's {self.spec.torso.kind} conv network on {self.env or 'frames'} is "
                f"not exported (esnb export writes MLP policies); esnb play RUN plays it and "
                f"--video records it")

    def numpy(self):
        """``act(obs) -> int``: the greedy action for one observation (a frame stack, as the
        environment gives it), computed as the run's evaluations compute it."""
        actor = NumpyActor(self.spec, self.flat)

        def act(obs):
            return int(actor.greedy(np.asarray(obs).reshape(1, -1))[0])

        return act
