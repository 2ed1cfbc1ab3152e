"""esnb against a peer library on the same workload, the peer in an interpreter of its own:
ES against EvoTorch (:mod:`.es_vs_evotorch`), IMPALA against RLlib (:mod:`.impala_vs_rllib`);
whether that interpreter has the peer (:mod:`.versions`)."""
