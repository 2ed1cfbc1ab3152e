"""An ES run's checkpoint state: what :class:`~esnb.runners.es.runner.ES` saves and restores
(theta and Adam's state, observation statistics, generators, counters, the pending IW-ES batch),
and the check that a resumed run perturbs with the same noise table."""

from __future__ import annotations

import logging

from esnb.record import restore_rng

log = logging.getLogger("esnb.es")


def run_state(run) -> tuple[dict, dict]:
    """An :class:`~esnb.runners.es.runner.ES` run's checkpoint: Adam's and the observation
    statistics' arrays, the generators, the counters, the pending IW-ES batch and the noise
    table's digest."""
    arrays = run.es.state_dict()
    obs = run.obs_stats.state_dict()
    arrays.update(obs_sum=obs["sum"], obs_sumsq=obs["sumsq"])
    meta = {
        "obs_count": obs["count"],
        "rng": run._rng.bit_generator.state,
        "eval_rng": run._eval_rng.bit_generator.state,
        "env_steps": run.env_steps,
        "eval_steps": run.eval_steps,
        "episodes": run.episodes,
        "num_params": run.spec.num_params,
        # the pending IW-ES batch and a bitwise resume need the same noise
        "noise_digest": run.noise.digest,
    }
    iw_meta, iw_arrays = run.iw.state()
    meta.update(iw_meta)
    arrays.update(iw_arrays)
    return meta, arrays


def load_run_state(run, meta: dict, arrays: dict) -> None:
    """Restore :func:`run_state`'s checkpoint into ``run`` (an ES run of the same policy)."""
    if int(meta["num_params"]) != run.spec.num_params or arrays["theta"].shape != (
        run.spec.num_params,
    ):
        raise ValueError(
            f"checkpoint has {arrays['theta'].shape[0]} parameters, this policy "
            f"{run.spec.num_params}"
        )
    missing = [k for k in ("adam_exp_avg", "adam_exp_avg_sq", "adam_step", "obs_sum",
                           "obs_sumsq") if k not in arrays and
               (k.startswith("obs") or int(meta["iteration"]) > 0)]
    if missing:  # a run that took steps has Adam's state: without it, it would not resume
        raise ValueError(f"checkpoint misses the arrays {', '.join(missing)}")
    if "adam_step" in arrays and not float(arrays["adam_step"]) >= 0:
        raise ValueError(f"adam_step must be >= 0, got {float(arrays['adam_step'])}")
    meta = same_noise(run.noise, meta)
    run.es.load_state_dict(arrays)
    run.obs_stats.load_state_dict(
        {"sum": arrays["obs_sum"], "sumsq": arrays["obs_sumsq"], "count": meta["obs_count"]})
    restore_rng(run._rng, meta["rng"], "rng")
    restore_rng(run._eval_rng, meta["eval_rng"], "eval_rng")
    run.env_steps = int(meta["env_steps"])
    run.eval_steps = int(meta["eval_steps"])
    run.episodes = int(meta["episodes"])
    run.iw.load(meta, arrays)


def same_noise(noise, meta: dict) -> dict:
    """Refuse a checkpoint made with another noise table; one made before tables carried
    a digest (esnb's first table, numpy's stream) goes on with this one, without its
    pending IW-ES batch (whose offsets point into the old table)."""
    saved = meta.get("noise_digest")
    if saved is None:
        log.warning("this checkpoint predates esnb's portable noise table: the run goes on "
                    "with other perturbations than it had%s",
                    " and without its pending IW-ES batch" if meta.get("iw_pending") else "")
        return {**meta, "iw_pending": False}
    if saved != noise.digest:
        raise ValueError(f"the checkpoint was made with a noise table of SHA-256 "
                         f"{str(saved)[:16]}…, this machine's is {noise.digest[:16]}… "
                         f"({noise.origin}): resuming would change every "
                         f"perturbation; resume it where esnb builds the same table")
    return meta
