"""The IW-ES part of :class:`esnb.ES`: reusing each batch for up to K more updates.

A generation of ``ES(iw_k=K)`` is: (1) up to K importance-weighted updates from the *previous*
generation's batch, under this generation's controls, then that batch's observation sums are
added; (2) rollouts; (3) the ordinary update, after which the batch waits for the next
generation. Doing (1) at the start of the next generation, not at the end of this one, changes
no order of operations (nothing happens in between) but means a control changed while rollouts
ran -- sigma, K, the clip -- applies to the IW updates, with the batch's own ``sigma_old``
kept to weight it: the weights stay right, and a changed sigma simply spends the batch (ESS
collapses). The last batch of a run is still pending when the run ends; it is saved in
checkpoints and used when the run continues.

With ``iw_adaptive`` the updates go on while ESS/n of the raw weights stays above
``iw_ess_threshold`` (the paper's future work: skip updates whose variance is excessive).

Every worker replays the updates taken (:class:`~esnb.es.iw.IWUpdate`) on its own
replica, computing the ``eps_j . delta`` dot products from its own theta: nothing of size d
travels (the paper's section 3.2 distributed them; with replicas no process waits for them).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from esnb.es.iw import Batch, IWUpdate

log = logging.getLogger("esnb.iw")


class IWReuse:
    """Holds the pending batch and makes its IW updates (the maths: :class:`OpenAIES`'s
    :meth:`~esnb.es.OpenAIES.iw_gradient` and :meth:`~esnb.es.OpenAIES.tell_iw`)."""

    def __init__(self):
        self.pending: Batch | None = None
        self.pending_obs: tuple[np.ndarray, np.ndarray, float] | None = None
        self.log: list[dict[str, Any]] = []

    def keep(self, batch: Batch, obs: tuple[np.ndarray, np.ndarray, float] | None) -> None:
        self.pending, self.pending_obs = batch, obs

    def run(self, snap, es, generation: int) -> tuple[dict[str, Any], list[IWUpdate]]:
        """Make this generation's IW updates on the pending batch; returns the history
        columns and the updates taken (what workers replay)."""
        batch = self.pending
        row = {"iw_updates": 0, "iw_ess_frac": np.nan, "iw_skipped": ""}
        taken: list[IWUpdate] = []
        if batch is None or snap.iw_k == 0:
            return row, taken
        while batch.updates < snap.iw_k:
            k = batch.updates + 1
            update = IWUpdate(snap.lr, snap.weight_decay, snap.sigma, snap.iw_clip,
                              snap.iw_normalize)
            step = es.iw_gradient(batch, update)
            entry = {"generation": generation, "batch_generation": batch.generation, "k": k,
                     "ess": step.ess, "ess_frac": step.ess_frac,
                     "clipped_frac": step.clipped_frac, "sigma_old": batch.sigma_old,
                     "sigma_new": snap.sigma, "grad_norm": np.nan, "update_norm": 0.0,
                     "skipped": step.skipped}
            if k == 1:
                row["iw_ess_frac"] = step.ess_frac
            if not step.skipped and snap.iw_adaptive and not (
                step.ess_frac >= snap.iw_ess_threshold
            ):
                entry["skipped"] = (f"ESS/n {step.ess_frac:.3g} below "
                                    f"{snap.iw_ess_threshold:g}")
            if entry["skipped"]:
                if step.grad is None:
                    log.warning("generation %d: IW update %d skipped: %s", generation, k,
                                entry["skipped"])
                self.log.append(entry)
                row["iw_skipped"] = entry["skipped"]
                break
            info = es.tell_iw(batch, update, step)
            entry.update(grad_norm=info["grad_norm"], update_norm=info["update_norm"])
            self.log.append(entry)
            taken.append(update)
            row["iw_updates"] = k
        return row, taken

    def release_obs(self, obs_stats) -> None:
        """Add the pending batch's observation sums (after its IW updates) and drop it."""
        if self.pending_obs is not None:
            obs_stats.add(*self.pending_obs)
        self.pending, self.pending_obs = None, None

    # -- checkpoints -------------------------------------------------------------------------
    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta: dict[str, Any] = {"iw_log": self.log, "iw_pending": self.pending is not None}
        arrays: dict[str, np.ndarray] = {}
        b = self.pending
        if b is not None:
            arrays.update(iw_indices=b.indices, iw_shaped=b.shaped, iw_theta_old=b.theta_old)
            meta.update(iw_sigma_old=b.sigma_old, iw_generation=b.generation,
                        iw_updates=b.updates, iw_has_obs=self.pending_obs is not None)
            if self.pending_obs is not None:
                arrays.update(iw_obs_sum=self.pending_obs[0], iw_obs_sumsq=self.pending_obs[1])
                meta["iw_obs_count"] = self.pending_obs[2]
        return meta, arrays

    def load(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.log = list(meta.get("iw_log", []))
        self.pending = self.pending_obs = None
        if meta.get("iw_pending"):
            self.pending = Batch(arrays["iw_indices"], arrays["iw_shaped"],
                                 arrays["iw_theta_old"], float(meta["iw_sigma_old"]),
                                 int(meta["iw_generation"]), int(meta["iw_updates"]))
            if meta.get("iw_has_obs"):
                self.pending_obs = (arrays["iw_obs_sum"], arrays["iw_obs_sumsq"],
                                    float(meta["iw_obs_count"]))
