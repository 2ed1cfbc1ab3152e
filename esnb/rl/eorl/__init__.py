"""EORL (Khadilkar 2023, "Supplementing Gradient-Based Reinforcement Learning with Simple
Evolutionary Ideas"): the maths of its Monte-Carlo DQN population. The learners that drive
the episodes (EORL and its baselines) are :mod:`esnb.runners.eorl`; crossover and mutation
are :mod:`esnb.evo`.

- :mod:`~esnb.rl.eorl.mc_dqn`: the population of small Q-networks regressed on Monte-Carlo
  returns (batched over members, each with its own Adam);
- :mod:`~esnb.rl.eorl.episodes`: the parts below the learning: environments, numbering of
  distinct states, episodes, training samples and the epsilon-greedy act.
"""
