"""Ape-X's scaling claims (Horgan et al. 2018, Figures 4 and 13) next to esnb's sweep
(``notebooks/apex_scaling.ipynb``), in plain-language verdicts. The sweep and its figure are
:mod:`esnb.bench.apex.scaling`'s."""

from __future__ import annotations

import numpy as np
import pandas as pd

from esnb.bench.common.report import verdict


def apex_verdicts(summary: pd.DataFrame) -> list[str]:
    """Ape-X's claims (data rate linear in the actors; learning better with more actors)
    against :func:`esnb.bench.apex.scaling.sweep`'s summary."""
    s = summary.sort_values("num_actors")
    n0, n1 = s.num_actors.iloc[0], s.num_actors.iloc[-1]
    r = s.actor_steps_per_s.iloc[-1] / s.actor_steps_per_s.iloc[0]
    out = [f"throughput from {n0} to {n1} actors: x{r:.2f} (linear, the paper's Figure 13: "
           f"x{n1 / n0:.0f}). " + ("Agrees." if r >= 0.8 * n1 / n0 else
                                   "Disagrees (the paper's actors have a core each; here "
                                   "they share the machine's).")]
    best = s.best_eval.to_numpy()
    up = bool(np.all(np.diff(best) >= 0) and best[-1] > best[0])
    out.append("best greedy evaluation by actors: " + ", ".join(
        f"{a}: {b:.0f}" for a, b in zip(s.num_actors, best))
        + f". Figure 4 (more actors, better learning): {verdict(up)}")
    return out
