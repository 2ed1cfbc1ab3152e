"""Reinforcement-learning mathematics (no Dask): learners, losses, targets, one package per
algorithm. Runtimes (actor loops, training loops) are the runners' (:mod:`esnb.runners`).

- :mod:`esnb.rl.apex`: Ape-X DQN and DPG (Horgan et al. 2018);
- :mod:`esnb.rl.impala`: IMPALA and V-trace (Espeholt et al. 2018);
- :mod:`esnb.rl.td3`: TD3 as CEM-RL and AES-RL use it (Fujimoto et al. 2018);
- :mod:`esnb.rl.eorl`: EORL's Monte-Carlo DQN population (Khadilkar 2023);
- shared: :mod:`esnb.rl.constants` (the learners' published constants and option names,
  importable without torch: the configs and the CLI read them) and :mod:`esnb.rl.optim`
  (the learners' optimizers -- torch.optim's updates bit for bit, without its import of
  torch's compiler -- and their state as flat arrays).

Public names are re-exported below, one import line per module (numpy only).
"""
from esnb.rl.apex.nstep import NStepBuilder, apex_schedule  # noqa: E402,F401  (Ape-X)
from esnb.rl.impala.vtrace import VTraceReturns, vtrace  # noqa: E402,F401  (IMPALA)
