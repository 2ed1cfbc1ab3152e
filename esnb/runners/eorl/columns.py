"""The algorithms of the paper's tables by their column names, and the command-line flags
that choose one and the environment's version (``esnb train eorl``). No imports: the command
line lists these without loading torch."""

from esnb.settings import integer, number

#: table column name -> (runner class name, settings), in the paper's column order (CER is
#: not implemented)
ALGORITHMS: dict[str, tuple[str, dict]] = {
    "VAN": ("VAN", {}),
    "HER": ("HER", {}),
    "PER": ("PER", {}),
    "CBE": ("CBE", {}),
    "EORL-FIX": ("EORL", {"variant": "EORL-FIX"}),
    "CEM-RL": ("CEMRLRoundRobin", {}),
    "EORL-05-00": ("EORL", {"variant": "EORL-05-00"}),
    "EORL-05-05": ("EORL", {"variant": "EORL-05-05"}),
    "EORL-10-05": ("EORL", {"variant": "EORL-10-05"}),
    "EORL-ACTV": ("EORL", {"variant": "EORL-ACTV"}),
}

#: ``esnb train eorl``'s flags besides the settings (``Trainer.extra``; turned into the runner
#: class and ``env_kwargs`` by :func:`esnb.runners.eorl.command.adapt`)
CLI_FLAGS: dict[str, dict] = {
    "algorithm": dict(dest="eorl_algorithm", default="EORL", choices=["EORL", *ALGORITHMS],
                      help="EORL (with --variant or --kappa/--mu/--schedule) or a table column "
                           "[default: EORL]"),
    "size": dict(type=integer(1), default=6,
                 help="bits (bitflip) or grid side (gridnav) [default: 6]"),
    "subgoal": dict(default="0", help="bitflip: 0 or 1; gridnav: 0, 1, 2+ or 2- [default: 0]"),
    "stochasticity": dict(type=number(0, 1), default=0.0,
                          help="gridnav only: probability of a random move [default: 0]"),
}
