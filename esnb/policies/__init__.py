"""Policies: a torch MLP over one flat parameter vector, and its numpy fast path.

``MLPPolicy`` (torch) is imported lazily so rollout workers never pay for importing torch.
"""

from esnb.policies.numpy_mlp import NumpyPolicy
from esnb.policies.spec import PolicySpec, init_params

__all__ = ["MLPPolicy", "NumpyPolicy", "PolicySpec", "init_params"]


def __getattr__(name):
    if name == "MLPPolicy":
        from esnb.policies.torch_mlp import MLPPolicy

        return MLPPolicy
    raise AttributeError(f"module 'esnb.policies' has no attribute {name!r}")
