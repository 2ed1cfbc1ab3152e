"""One flat-parameter network family: :class:`MLP` specs (numpy forward and initialisations,
no torch), :class:`Layout` of named parts in one vector, policies (:class:`PolicySpec`: an MLP
plus the action kind, bounds and observation clip; :class:`NumpyPolicy`, its one-observation
numpy fast path) and the torch twin (:mod:`esnb.nets.torch_mlp`: :class:`FlatModule`,
:class:`MLPPolicy`, loaded on first use so rollout workers never import torch).

Modules: :mod:`~esnb.nets.mlp` (the spec, the numpy forward, the observation normalisation,
initialisations), :mod:`~esnb.nets.layout`, :mod:`~esnb.nets.policy`,
:mod:`~esnb.nets.numpy_policy`, :mod:`~esnb.nets.torch_mlp`; :mod:`~esnb.nets.conv` (the
papers' convolutional torsos as layout parts: Nature DQN, IMPALA shallow and deep, MinAtar) and
:mod:`~esnb.nets.torch_conv` (their torch forward over a flat slice).
"""

from esnb.lazy import lazy_names
from esnb.nets.layout import Layout
from esnb.nets.mlp import MLP, init_fan_in, init_glorot, init_normc, normalise_obs
from esnb.nets.numpy_policy import NumpyPolicy
from esnb.nets.policy import PolicySpec, init_params

__all__ = ["MLP", "FlatModule", "Layout", "MLPPolicy", "NumpyPolicy", "ObsNormModule",
           "PolicySpec", "init_fan_in", "init_glorot", "init_normc", "init_params",
           "normalise_obs"]
__getattr__, __dir__ = lazy_names(__name__, {"FlatModule": "esnb.nets.torch_mlp",
                                             "MLPPolicy": "esnb.nets.torch_mlp",
                                             "ObsNormModule": "esnb.nets.torch_mlp"})
