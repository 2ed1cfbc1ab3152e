"""Benchmarks: each measures its alternatives side by side in one run and prints ratios.

The machine is shared and noisy, so a benchmark interleaves what it compares instead of
timing one thing after the other, and reports medians. Grouped by what each part is for:

- :mod:`~esnb.bench.es`, :mod:`~esnb.bench.aes`, :mod:`~esnb.bench.apex`,
  :mod:`~esnb.bench.impala`, :mod:`~esnb.bench.eorl`: one algorithm's benchmarks, and its
  paper's tables and figures beside esnb's runs (``paper.py``, for ``notebooks/``);
- :mod:`~esnb.bench.learner`: every torch learner at its paper's size on one device;
  :mod:`~esnb.bench.frames`: Atari's preprocessed agent steps against gymnasium's wrappers;
  :mod:`~esnb.bench.startup`: a fresh process to its first optimizer step (torch.optim's
  compiler import against esnb's optimizers);
- :mod:`~esnb.bench.peers`: esnb against a peer library (EvoTorch, RLlib) in an interpreter of
  the peer's own;
- :mod:`~esnb.bench.soak`: long runs, faults and signals (memory flat, nothing lost uncounted,
  how fast a run stops);
- :mod:`~esnb.bench.results`: the results page (docs/results.md);
- :mod:`~esnb.bench.run_path`: ``esnb train``'s run path, this tree against another checkout;
- :mod:`~esnb.bench.common`: what the benchmarks share (their flags, the report around their
  figures, a program in a fresh interpreter).

:data:`BENCHMARKS` names the command of each (``esnb bench <name>``).
"""

#: ``esnb bench <name>``: a module providing ``add_arguments(parser)`` and ``run(args) -> int``
BENCHMARKS: dict[str, str] = {
    "es-scaling": "esnb.bench.es.scaling",
    "es-scale-out": "esnb.bench.es.scale_out",
    "interrupts": "esnb.bench.soak.interrupts",
    "memory": "esnb.bench.es.memory",
    "noise": "esnb.bench.es.noise",
    "replay": "esnb.bench.apex.replay",
    "learner": "esnb.bench.learner",
    "startup": "esnb.bench.startup",
    "atari-frames": "esnb.bench.frames",
    "apex": "esnb.bench.apex.learning",
    "apex-scaling": "esnb.bench.apex.scaling",
    "impala": "esnb.bench.impala.learning",
    "eorl-table": "esnb.bench.eorl.tables",
    "iw-overhead": "esnb.bench.es.iw_overhead",
    "iw-efficiency": "esnb.bench.es.iw_efficiency",
    "soak": "esnb.bench.soak.steady",
    "aes-time": "esnb.bench.aes.wall_time",
    "aes-rules": "esnb.bench.aes.rules",
    "rollout": "esnb.bench.es.rollout",
    "forward": "esnb.bench.es.forward",
    "dask-idle": "esnb.bench.es.dask_idle",
    "es-vs-evotorch": "esnb.bench.peers.es_vs_evotorch",
    "impala-vs-rllib": "esnb.bench.peers.impala_vs_rllib",
    "results": "esnb.bench.results.command",
    "run-path": "esnb.bench.run_path.command",
}
