"""The algorithms of the paper's tables by their column names. No imports: the command line
lists them without loading torch (``esnb train eorl --algorithm``, its flags in
:class:`esnb.runners.eorl.config.EORLCommand`)."""

#: table column name -> (runner class name, settings), in the paper's column order
COLUMNS: dict[str, tuple[str, dict]] = {
    "VAN": ("VAN", {}),
    "CER": ("CER", {}),
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
