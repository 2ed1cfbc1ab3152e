"""IMPALA (Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with Importance
Weighted Actor-Learner Architectures", arXiv 1802.01561). The actor tasks and the runner are
:mod:`esnb.runners.impala`.

- :mod:`~esnb.rl.impala.vtrace`: the V-trace targets (section 4.1);
- :mod:`~esnb.rl.impala.actor_critic`: the actor-critic spec and the actors' numpy policy
  (no torch);
- :mod:`~esnb.rl.impala.unrolls`: the batch of unrolls and the queue that assembles it;
- :mod:`~esnb.rl.impala.learner`: the torch actor-critic, the loss and the learner.
"""

from esnb.lazy import lazy_names

_AC, _LEARNER = "esnb.rl.impala.actor_critic", "esnb.rl.impala.learner"
#: the public names, loaded on first use (``esnb.rl.impala.ImpalaLearner`` as before the split;
#: the numpy ones never load torch; V-trace is :mod:`esnb.rl.impala.vtrace` or ``esnb.rl.vtrace``)
_LAZY = {"ActorCriticSpec": _AC, "NumpyActor": _AC, "init_actor_critic": _AC,
         "UnrollBatch": "esnb.rl.impala.unrolls", "UnrollQueue": "esnb.rl.impala.unrolls",
         "ActorCritic": _LEARNER, "ImpalaLearner": _LEARNER, "LossConfig": _LEARNER,
         "impala_loss": _LEARNER, "vtrace_inputs": _LEARNER, "clip_rewards": _LEARNER}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
