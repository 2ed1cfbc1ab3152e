"""Ape-X's benchmarks: learning speed on CartPole and InvertedPendulum (:mod:`.learning`),
more and more actors (:mod:`.scaling`), the prioritized replay's throughput in-process and
through the Dask actor (:mod:`.replay`), and the paper's scaling claims beside the sweep
(:mod:`.paper`)."""
