"""ES's benchmarks: throughput inline and on a cluster (:mod:`.scaling`), orchestration
overhead from 2 to 32 workers (:mod:`.scale_out`), rollouts against the physics
(:mod:`.rollout`), the lock-step policy forward (:mod:`.forward`), the CPU Dask's own monitors
take (:mod:`.dask_idle`), the noise table's build (:mod:`.noise`), memory and cold start
(:mod:`.memory`); IW-ES's cost per iteration (:mod:`.iw_overhead`) and sample efficiency
(:mod:`.iw_efficiency`), and its paper's figures beside them (:mod:`.iw_paper`)."""
