"""The physics of ES's own episodes: a fair limit for ES's rollouts.

The limit :func:`esnb.bench.es.rollout.physics_rate` measures steps MuJoCo on random actions.
ES's early policies do not act at random: on HalfCheetah their episodes make about 2 contacts
per step against 0.65 for random actions, and their physics alone costs ~1.2x more (issue 37).
A rollout loop cannot be faster than the physics of the episodes it runs, so the benchmarks
also measure that:

1. :func:`record` runs ES inline (a fresh interpreter, the benchmark's settings and seed: the
   same episodes as the timed run on a cluster, whose theta is bitwise the inline one) with
   ``mujoco.mj_step`` wrapped, and keeps, for every episode of the timed generations, its
   state after the reset (``mj_getState``, the integration state) and the controls of each of
   its steps;
2. :func:`replay_rate` sets each episode's state and steps ``mj_step`` with its controls, in a
   Python loop as lean as :func:`~esnb.bench.es.rollout.physics_rate`'s, and checks the last
   state reached equals the recorded one (bit for bit: the same physics).

Both run in fresh interpreters (``python -m esnb.bench.es.own_physics``), MuJoCo's timer as
esnb's processes have it (off: :mod:`esnb.envs.mujoco_timer`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import numpy as np


def record(env_id: str, population: int, warm_up: int, generations: int, path: str,
           seed: int = 0, **es_settings) -> dict:
    """Run ES inline (``seed``, no evaluations, ``es_settings``) for ``warm_up`` then
    ``generations`` generations and save the timed generations' episodes to ``path`` (.npz):
    their start and last states, controls (one row per env step) and steps. Returns
    ``{"episodes", "steps", "contacts_per_step"}``."""
    import mujoco

    original, kind = mujoco.mj_step, mujoco.mjtState.mjSTATE_INTEGRATION
    live: dict = {}  # id(data) -> the episode running on it
    done: list = []
    recording = False

    def step(model, data, nstep=1):
        if not recording:
            return original(model, data, nstep=nstep)
        ep = live.get(id(data))
        if ep is None or data.time < ep["time"]:  # reset since its last step: a new episode
            if ep is not None:
                done.append(ep)
            size = mujoco.mj_stateSize(model, kind)
            ep = live[id(data)] = {"start": _state(model, data, size, kind), "ctrl": [],
                                   "contacts": 0, "nstep": int(nstep), "size": size}
        ep["ctrl"].append(data.ctrl.copy())
        original(model, data, nstep=nstep)
        ep["contacts"] += int(data.ncon)
        ep["time"] = float(data.time)
        ep["end"] = _state(model, data, ep["size"], kind)

    from esnb import ES
    from esnb.envs import rollout
    from esnb.envs.lockstep import run_lockstep
    from esnb.runners.es import tasks

    # episodes step one MjData each, through mujoco.mj_step (wrapped here), not a
    # mujoco.batch: the same bits (tests/test_mujoco_batch.py); and on environments made
    # now, whose step looks mj_step up as they are built (esnb.envs.mujoco_fast), not on
    # this thread's cached ones
    runner, cached = tasks.lockstep_runner, getattr(rollout._local, "envs", None)
    mujoco.mj_step, tasks.lockstep_runner = step, lambda env: run_lockstep
    rollout._local.envs = {}
    try:
        es = ES(env_id, population=population, eval_interval=0, seed=seed, **es_settings)
        try:
            es.step(warm_up)
            recording = True
            es.step(generations)
            recording = False
        finally:
            es.close()
    finally:
        mujoco.mj_step, tasks.lockstep_runner = original, runner
        for envs in rollout._local.envs.values():
            for env in envs:
                env.close()
        rollout._local.envs = cached if cached is not None else {}
    done.extend(live.values())
    lengths = np.array([len(ep["ctrl"]) for ep in done])
    np.savez(path, starts=np.stack([ep["start"] for ep in done]),
             ends=np.stack([ep["end"] for ep in done]), lengths=lengths,
             ctrl=np.concatenate([np.stack(ep["ctrl"]) for ep in done]),
             nstep=np.array([ep["nstep"] for ep in done]))
    steps = int(lengths.sum())
    return {"episodes": len(done), "steps": steps,
            "contacts_per_step": sum(ep["contacts"] for ep in done) / max(steps, 1)}


def _state(model, data, size: int, kind) -> np.ndarray:
    import mujoco

    out = np.empty(size)
    mujoco.mj_getState(model, data, out, kind)
    return out


def replay_rate(env_id: str, path: str, seed: int = 0) -> dict:
    """Steps per second of ``mj_step`` replaying :func:`record`'s episodes (only the stepping
    loops timed) and whether every replayed episode ends in its recorded state bit for bit;
    interleaved with it, episode by episode, the same number of steps from the same start
    state on random controls (uniform in the actuators' ranges): ``cost_vs_random``, how many
    times the random actions' rate the episodes' physics costs, measured in the same seconds
    of the same process, and the contacts per step of each."""
    import mujoco

    from esnb.envs import make_env

    env = make_env(env_id).unwrapped
    model, data = env.model, env.data
    saved = np.load(path)
    starts, ends, lengths, ctrl, nsteps = (saved[k] for k in
                                           ("starts", "ends", "lengths", "ctrl", "nstep"))
    kind, mj_step, mj_set = mujoco.mjtState.mjSTATE_INTEGRATION, mujoco.mj_step, mujoco.mj_setState
    low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    rng = np.random.default_rng(seed)
    data_ctrl = data.ctrl
    row, same = 0, True
    seconds = {"own": 0.0, "random": 0.0}
    contacts = {"own": 0, "random": 0}
    per_step = []  # each own episode's physics seconds per step
    for e in range(len(lengths)):
        nstep, n = int(nsteps[e]), int(lengths[e])
        random_rows = rng.uniform(low, high, (n, len(low)))
        for name, rows in (("own", ctrl[row:row + n]), ("random", random_rows)):
            mj_set(model, data, starts[e], kind)
            t0 = time.perf_counter()
            for a in rows:
                data_ctrl[:] = a
                mj_step(model, data, nstep=nstep)
            took = time.perf_counter() - t0
            seconds[name] += took
            if name == "own":
                per_step.append(took / max(n, 1))
                same &= bool(np.array_equal(_state(model, data, starts.shape[1], kind), ends[e]))
            contacts[name] += _contacts(model, data, rows, starts[e], nstep) if e < 4 else 0
        row += n
    probe = max(int(lengths[:4].sum()), 1)
    cost = np.asarray(per_step) / np.mean(per_step)
    return {"steps_per_s": row / seconds["own"], "random_steps_per_s": row / seconds["random"],
            "cost_vs_random": seconds["own"] / seconds["random"], "steps": row, "same": same,
            "contacts_per_step": {k: v / probe for k, v in contacts.items()},
            "episode_cost": {"cv": float(cost.std()), "min": float(cost.min()),
                             "max": float(cost.max())}}


def _contacts(model, data, rows, start, nstep: int) -> int:
    """Contacts summed over the steps of ``rows`` from ``start`` (untimed, after the timed
    loop: counting inside it would cost the loop a read per step)."""
    import mujoco

    mujoco.mj_setState(model, data, start, mujoco.mjtState.mjSTATE_INTEGRATION)
    total = 0
    for a in rows:
        data.ctrl[:] = a
        mujoco.mj_step(model, data, nstep=nstep)
        total += int(data.ncon)
    return total


def replay_in_parallel(env_id: str, path: str, processes: int) -> dict:
    """:func:`replay_rate` in ``processes`` fresh interpreters at once: the mean rates (own
    episodes, random actions), the mean cost against random actions, contacts per step, and
    the spread of an episode's physics cost per step (the first process's: its coefficient of
    variation, least and most over the mean; what leaves one task of a generation slower than
    another)."""
    procs = [subprocess.Popen([sys.executable, "-m", __name__, "replay", env_id, path, str(i)],
                              stdout=subprocess.PIPE, text=True) for i in range(processes)]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        results += [json.loads(line.split(" ", 1)[1])
                    for line in out.splitlines() if line.startswith("ESNB-BENCH ")]
    if len(results) != processes:
        raise RuntimeError("a replay of ES's own episodes failed")
    if not all(r["same"] for r in results):
        raise RuntimeError("a replay of ES's own episodes did not end where they ended")
    return {"own": statistics.mean(r["steps_per_s"] for r in results),
            "random": statistics.mean(r["random_steps_per_s"] for r in results),
            "cost_vs_random": statistics.mean(r["cost_vs_random"] for r in results),
            "contacts_per_step": results[0]["contacts_per_step"],
            "episode_cost": results[0]["episode_cost"]}


def record_in_child(env_id: str, population: int, warm_up: int, generations: int,
                    path: str) -> dict:
    """:func:`record` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-m", __name__, "record", env_id, str(population),
                          str(warm_up), str(generations), path],
                         capture_output=True, text=True, timeout=3600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("ESNB-BENCH ")]
    if out.returncode or not lines:
        raise RuntimeError(f"recording ES's own episodes failed: {out.stderr[-2000:]}")
    return json.loads(lines[-1].split(" ", 1)[1])


class OwnEpisodes:
    """ES's own episodes of a benchmark's timed generations, recorded once (a fresh
    interpreter, a temporary folder) and replayed on demand; ``info``: episodes, steps and
    contacts per step of the recording."""

    def __init__(self, env_id: str, population: int, warm_up: int, generations: int):
        import tempfile

        self.env_id = env_id
        self._folder = tempfile.TemporaryDirectory(prefix="esnb-own-episodes-")
        self.path = f"{self._folder.name}/episodes.npz"
        self.info = record_in_child(env_id, population, warm_up, generations, self.path)

    def rate(self, processes: int) -> dict:
        """Replayed physics steps per second, per process, ``processes`` at once (and random
        actions' from the same states, interleaved: :func:`replay_in_parallel`)."""
        return replay_in_parallel(self.env_id, self.path, processes)

    def close(self) -> None:
        self._folder.cleanup()


def _main(argv: list[str]) -> None:
    if argv[0] == "record":
        env_id, population, warm_up, generations, path = argv[1:6]
        out = record(env_id, int(population), int(warm_up), int(generations), path)
    else:
        out = replay_rate(argv[1], argv[2], int(argv[3]) if len(argv) > 3 else 0)
    print("ESNB-BENCH " + json.dumps(out), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
