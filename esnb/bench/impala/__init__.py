"""IMPALA's benchmarks: time to solve CartPole-v1, throughput and policy lag, V-trace against
no correction under injected lag (:mod:`.learning`), and the paper's claim beside the runs
(:mod:`.paper`)."""
