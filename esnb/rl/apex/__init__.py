"""Ape-X (Horgan et al. 2018, "Distributed Prioritized Experience Replay"): the maths of its
DQN and DPG variants. The actors' runtime is :mod:`esnb.runners.apex.actor`.

- :mod:`~esnb.rl.apex.nets`: the dueling Q-network and the DPG actor and critic as layouts
  of one flat vector, their numpy forwards and the actors' initial priorities (no torch);
- :mod:`~esnb.rl.apex.torch_nets`: their torch twins (the learners');
- :mod:`~esnb.rl.apex.dqn`: the DQN learner (double Q-learning, n-step targets);
- :mod:`~esnb.rl.apex.dpg`: the DPG learner (n-step TD critic, deterministic policy gradient);
- :mod:`~esnb.rl.apex.nstep`: n-step transitions and the per-actor exploration schedule.
"""
