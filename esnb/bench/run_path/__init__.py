"""The run path against another tree of esnb (``esnb bench run-path --against DIR``): the same
``esnb train`` commands run with this tree and with DIR, each in a fresh interpreter that
imports its tree (:mod:`.trees`), alternating round by round; the cases and how each figure is
read from a run's own history (:mod:`.cases`); the rounds and the report (:mod:`.command`)."""
