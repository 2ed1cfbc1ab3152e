"""AES-RL's benchmarks (Lee et al. 2020): Table 1's wall times of CEM-RL, P-CEM-RL and AES-RL
(:mod:`.wall_time`), Table 2's update rules in small (:mod:`.rules`), and the paper's tables
beside esnb's runs (:mod:`.paper`)."""
