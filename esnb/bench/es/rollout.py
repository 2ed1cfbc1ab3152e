"""ES rollouts against the physics: steps/s per core of each layer, as fractions of ``mj_step``.

Measured side by side, round after round (``--repeats``), medians reported:

- **physics**: ``mujoco.mj_step(model, data, nstep=frame_skip)`` in a Python loop on the
  task's own model, the controls set from random actions (the limit any rollout loop has),
  MuJoCo's timer off as in esnb's processes; beside it the same with the timer on (MuJoCo's
  default: what a plain loop gets, :mod:`esnb.envs.mujoco_timer`);
- **physics in parallel**: the same in as many fresh processes as ES has workers, at once
  (per process): ES's workers meet that contention on a shared machine, a lone loop may not;
- **physics of ES's own episodes**, as many at once: the timed generations' episodes
  recorded inline (same seed, same episodes) and their controls replayed through ``mj_step``
  (:mod:`esnb.bench.es.own_physics`): ES's early policies make ~3x the contacts of random
  actions, so their physics costs more; the limit of these very rollouts;
- **gymnasium step**: the unwrapped environment's ``step`` on the same actions;
- **direct step**: :mod:`esnb.envs.mujoco_fast`'s step of the task on the same actions;
- **worker loop, before**: a pair task the way ES ran it before issue 26 (one episode at a
  time, :class:`~esnb.nets.NumpyPolicy`, gymnasium's step: ``FastEnv(direct=False)``);
- **worker loop, now**: :func:`esnb.runners.es.tasks.es_pairs` with ``batched=False``
  (lock-step episodes, each stepped through :mod:`esnb.envs.mujoco_fast`), the same pairs,
  checked to give the same returns;
- **worker loop, batched**: :func:`~esnb.runners.es.tasks.es_pairs` as ES's workers run it
  (the live episodes as the rows of one ``mujoco.batch.Batch``, :mod:`esnb.envs.mujoco_batch`,
  where the task has one), the same pairs, checked to give the same returns; the two
  lock-step loops are also given per second of their thread's CPU time, which a loaded
  machine's other processes change least;
- **ES end to end**: a fresh interpreter runs ``make_client(workers)`` + ``ES(env)``, warms
  up, then times generations: env steps per wall second per worker. ``--compare DIR`` runs the
  same program on the esnb in DIR (e.g. ``git archive <commit> | tar -x -C DIR``) in the same
  rounds, for a before/after in one run.

Targets (issue 37, HalfCheetah-v5, 2 workers): ES end to end >= 0.8 of the physics of its own
episodes and >= 0.7 of random actions', both run in as many processes at once.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import numpy as np

from esnb.bench.common.flags import add_json, add_settings, given_settings
from esnb.bench.common.interpreter import child
from esnb.bench.common.report import Session
from esnb.bench.es.own_physics import OwnEpisodes
from esnb.runners.es.config import ESConfig
from esnb.settings import integer

#: the ESConfig settings offered as flags
FLAGS = ("env", "population")
#: the benchmark's env, not ESConfig's: the target is HalfCheetah-v5's
ENV = "HalfCheetah-v5"

#: ES end to end in a fresh interpreter, using only what every esnb version has (make_client,
#: ES, step, history), so ``--compare`` can run it on an older tree
CHILD = r'''
import json, logging, sys, time, zlib
mode, env = sys.argv[1], sys.argv[5]
n, gens, pop = (int(a) for a in sys.argv[2:5])
from esnb.cluster import make_client
from esnb.runners.es import ES
client = make_client(n, dashboard_address=":0", silence_logs=logging.ERROR)
es = ES(env, client=client, population=pop, eval_interval=0, seed=0)
es.step(2)
before = int(es.history.env_steps.iloc[-1])
t0 = time.perf_counter()
es.step(gens)
seconds = time.perf_counter() - t0
steps = int(es.history.env_steps.iloc[-1]) - before
out = {"steps": steps, "seconds": seconds, "theta_crc": zlib.crc32(es.theta.tobytes())}
es.close()
client.close()
print("ESNB-BENCH " + json.dumps(out), flush=True)
'''


def add_arguments(p) -> None:
    add_settings(p, ESConfig, FLAGS, env=ENV, population=40)
    p.add_argument("--repeats", type=integer(1), default=3, help="rounds, each measuring all")
    p.add_argument("--steps", type=integer(100), default=20_000,
                   help="steps per physics and gymnasium-step measurement")
    p.add_argument("--pairs", type=integer(1), default=10,
                   help="mirrored pairs in the measured worker task (population 40 on 2 "
                        "workers: 10)")
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster workers (ES)")
    p.add_argument("--generations", type=integer(1), default=4,
                   help="timed ES generations per round (after 2 warm-up ones)")
    p.add_argument("--compare", default=None, metavar="DIR",
                   help="also run ES end to end on the esnb in DIR (default: none)")
    add_json(p)


def _actions(env, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    return rng.uniform(low, high, (n, len(low))).astype(np.float32)


def physics_rate(env_id: str, steps: int, seed: int = 0, timer: bool = False) -> float:
    """``mj_step(nstep=frame_skip)`` steps per second on the task's model (reset by gymnasium
    at the task's time limit, outside the timed loop's per-step work). MuJoCo's timer is off,
    as in esnb's processes (:mod:`esnb.envs.mujoco_timer`); ``timer``: on, as MuJoCo's
    bindings leave it (a fresh process only: once off, a process keeps it off)."""
    import gymnasium as gym
    import mujoco

    from esnb.envs.mujoco_timer import timer_installed, timer_off

    outer = gym.make(env_id)
    if not timer:
        timer_off()
    elif not timer_installed():
        raise RuntimeError("MuJoCo's timer is off in this process: measure it in a fresh one")
    env, limit = outer.unwrapped, outer.spec.max_episode_steps
    model, data, nstep = env.model, env.data, int(env.frame_skip)
    actions, ctrl, step = _actions(env, steps, seed), data.ctrl, mujoco.mj_step
    env.reset(seed=seed)
    t0 = time.perf_counter()
    for i in range(steps):
        ctrl[:] = actions[i]
        step(model, data, nstep=nstep)
        if (i + 1) % limit == 0:
            env.reset(seed=i)
    seconds = time.perf_counter() - t0
    outer.close()
    return steps / seconds


def physics_in_parallel(env_id: str, steps: int, processes: int, seed: int = 0,
                        timer: bool = False) -> float:
    """:func:`physics_rate` in ``processes`` fresh interpreters at once, their mean: the
    physics per core under the contention ES's workers meet (the machine is shared; a lone
    process may get a core that two workers would not). ``processes=1``: one fresh process
    (what ``timer=True`` needs)."""
    code = ("import sys; from esnb.bench.es.rollout import physics_rate; "
            "print('ESNB-BENCH', physics_rate(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), "
            "sys.argv[4] == 'on'))")
    procs = [subprocess.Popen([sys.executable, "-c", code, env_id, str(steps), str(seed + i),
                               "on" if timer else "off"],
                              stdout=subprocess.PIPE, text=True) for i in range(processes)]
    rates = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        rates += [float(line.split()[1]) for line in out.splitlines()
                  if line.startswith("ESNB-BENCH")]
    if len(rates) != processes:
        raise RuntimeError("a physics measurement failed")
    return statistics.mean(rates)


def gym_step_rate(env_id: str, steps: int, seed: int = 0, direct: bool = False) -> float:
    """Gymnasium's unwrapped ``step`` per second on the same actions (reset at termination or
    the time limit); ``direct``: esnb's step of the same task (:mod:`esnb.envs.mujoco_fast`)."""
    from esnb.envs import FastEnv

    env = FastEnv(env_id, direct=direct)
    core, limit = env.core, env.limit
    actions, step = _actions(env, steps, seed), core.step
    core.reset(seed=seed)
    t, t0 = 0, time.perf_counter()
    for i in range(steps):
        _, _, term, _, _ = step(actions[i])
        t += 1
        if term or t >= limit:
            core.reset(seed=i)
            t = 0
    seconds = time.perf_counter() - t0
    env.close()
    return steps / seconds


def _task(env_id: str, pairs: int, seed: int = 0):
    """A worker's pair task: its config, payload (OpenAI-ES's init, an observation
    normalisation) and pairs."""
    from esnb.envs import FastEnv
    from esnb.nets import PolicySpec, init_params
    from esnb.noise import NoiseConfig
    from esnb.runners.es.tasks import PolicyPayload, RolloutConfig

    env = FastEnv(env_id)
    spec = PolicySpec.for_spaces(env.observation_space, env.action_space)
    env.close()
    rng = np.random.default_rng(seed)
    cfg = RolloutConfig(env_id, spec, NoiseConfig(size=1 << 20, seed=seed))
    payload = PolicyPayload(init_params(spec, rng), rng.standard_normal(spec.obs_dim),
                            rng.uniform(0.5, 2.0, spec.obs_dim), 0.02)
    indices = rng.integers(0, (1 << 20) - spec.num_params, pairs)
    seeds = rng.integers(0, 2**31 - 1, pairs)
    collect = rng.random((pairs, 2)) < 0.01
    return cfg, payload, indices, seeds, collect


def loop_before(cfg, payload, indices, seeds, collect, env) -> tuple[int, float, np.ndarray]:
    """The pair loop ES ran before lock step: one episode at a time through ``NumpyPolicy``
    on ``env`` (gymnasium's step). Returns (steps, seconds, returns [n, 2])."""
    from esnb.envs import run_episode
    from esnb.nets import NumpyPolicy
    from esnb.noise import get_noise_table

    noise = get_noise_table(cfg.noise)
    theta, sigma = payload.theta, np.float32(payload.sigma)
    returns = np.zeros((len(indices), 2))
    steps, t0 = 0, time.perf_counter()
    for j in range(len(indices)):
        eps = noise.get(int(indices[j]), theta.size)
        for member, sign in ((0, 1.0), (1, -1.0)):
            policy = NumpyPolicy(cfg.spec, theta + np.float32(sign) * sigma * eps,
                                 payload.obs_mean, payload.obs_std)
            ep = run_episode(env, policy.act, int(seeds[j]), collect_obs=bool(collect[j, member]))
            returns[j, member] = ep.ret
            steps += ep.length
    return steps, time.perf_counter() - t0, returns


def _timed_pairs(task, batched: bool) -> tuple[dict, float]:
    """:func:`esnb.runners.es.tasks.es_pairs` on ``task`` (``batched`` or not) and the CPU
    seconds of this thread it took."""
    from esnb.runners.es.tasks import es_pairs

    cpu = time.thread_time()
    out = es_pairs(*task, batched=batched)
    return out, time.thread_time() - cpu


def measure(env: str = ENV, population: int = 40, repeats: int = 3, steps: int = 20_000,
            pairs: int = 10, workers: int = 2, generations: int = 4, compare: str | None = None,
            progress=print) -> dict:
    from esnb.envs import FastEnv
    from esnb.runners.es.tasks import es_pairs

    task = _task(env, pairs)
    old_env = FastEnv(env, direct=False)
    es_pairs(*task)  # warm: the lock-step environments and batch, the noise table
    es_pairs(*task, batched=False)
    trees = {"now": None} if compare is None else {"now": None, "before": compare}
    rates: dict = {k: [] for k in ("physics", "physics_timer", "physics_parallel",
                                   "physics_own_parallel", "gym_step", "direct_step",
                                   "loop_before", "loop_now", "loop_batched")}
    rates.update({f"es_{name}": [] for name in trees})
    crcs: dict = {name: set() for name in trees}
    cpu_rates: dict = {"loop_now": [], "loop_batched": []}
    same_returns = True
    own_cost: list = []  # own episodes' physics against random actions', same processes
    own = OwnEpisodes(env, population, 2, generations)  # CHILD: 2 warm-up generations
    for r in range(repeats):
        rates["physics"].append(physics_rate(env, steps, seed=r))
        rates["physics_timer"].append(physics_in_parallel(env, steps, 1, seed=r, timer=True))
        rates["physics_parallel"].append(physics_in_parallel(env, steps, workers, seed=r))
        replayed = own.rate(workers)
        rates["physics_own_parallel"].append(replayed["own"])
        own_cost.append(replayed["cost_vs_random"])
        rates["gym_step"].append(gym_step_rate(env, steps, seed=r))
        rates["direct_step"].append(gym_step_rate(env, steps, seed=r, direct=True))
        n, s, returns = loop_before(*task, old_env)
        rates["loop_before"].append(n / s)
        for key, batched in (("loop_now", False), ("loop_batched", True)):
            out, cpu = _timed_pairs(task, batched)
            rates[key].append(out["steps"] / out["seconds"])
            cpu_rates[key].append(out["steps"] / cpu)
            same_returns &= bool(np.array_equal(out["returns"], returns))
        for name, tree in trees.items():
            out = child("es", workers, generations, population, env, tree, source=CHILD)
            rates[f"es_{name}"].append(out["steps"] / out["seconds"] / workers)
            crcs[name].add(out["theta_crc"])
        progress(f"round {r + 1}/{repeats}: " + ", ".join(
            f"{k} {v[-1]:,.0f}" for k, v in rates.items()))
    old_env.close()
    own.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    return {"env": env, "population": population, "workers": workers, "pairs": pairs,
            "own_episodes": {**own.info, "cost_vs_random": statistics.median(own_cost),
                             "cost_vs_random_by_round": own_cost,
                             "contacts_per_step_replayed": replayed["contacts_per_step"],
                             "episode_cost": replayed["episode_cost"]},
            "repeats": repeats, "steps_per_s": med, "rounds": rates,
            "fraction_of_physics": {k: v / med["physics"] for k, v in med.items()},
            # ES's workers against the physics run by as many processes at once
            "es_fraction_of_parallel_physics": {
                name: med[f"es_{name}"] / med["physics_parallel"] for name in trees},
            # and against the physics of its own episodes (issue 37's fair limit)
            "es_fraction_of_own_physics": {
                name: med[f"es_{name}"] / med["physics_own_parallel"] for name in trees},
            "loop_returns_same": same_returns,
            # the two lock-step loops per second of their own thread's CPU time: what a loaded
            # machine's other processes change least
            "loop_cpu_steps_per_s": {k: statistics.median(v) for k, v in cpu_rates.items()},
            # batched over now round by round (each round's pair ran back to back), median
            "loop_batched_over_now": statistics.median(
                b / n for b, n in zip(rates["loop_batched"], rates["loop_now"])),
            "loop_batched_over_now_cpu": statistics.median(
                b / n for b, n in zip(cpu_rates["loop_batched"], cpu_rates["loop_now"])),
            "es_theta_same": None if compare is None else crcs["now"] == crcs["before"]}


LABELS = {"physics": "physics, mj_step(nstep=frame_skip)",
          "physics_timer": "physics, MuJoCo's timer on (its default)",
          "physics_parallel": "physics, in as many processes as workers",
          "physics_own_parallel": "physics of ES's own episodes, as many at once",
          "gym_step": "gymnasium's unwrapped step",
          "direct_step": "esnb's direct step (envs.mujoco_fast)",
          "loop_before": "worker loop, before (1 episode at a time)",
          "loop_now": "worker loop, now (lock step, direct)",
          "loop_batched": "worker loop, batched (mujoco.batch rows)",
          "es_now": "ES end to end, per worker",
          "es_before": "ES end to end, compared tree"}


def run(args) -> int:
    session = Session()
    es = ESConfig.build(**given_settings(args, ESConfig, FLAGS))
    r = measure(es.env, es.population, args.repeats, args.steps, args.pairs, args.workers,
                args.generations, args.compare)
    print()
    print(f"rollout on {r['env']}: steps/s per core, median of {r['repeats']} interleaved "
          f"rounds; ES: population {r['population']} on {r['workers']} workers")
    for key, rate in r["steps_per_s"].items():
        print(f"  {LABELS[key]:<44}{rate:>10,.0f}   {r['fraction_of_physics'][key]:.2f} of "
              f"the physics")
    print(f"  worker loop returns the same before, now and batched: {r['loop_returns_same']}")
    cpu = r["loop_cpu_steps_per_s"]
    print(f"  worker loop, batched / now (median of the rounds' ratios): "
          f"{r['loop_batched_over_now']:.2f}x per wall second, "
          f"{r['loop_batched_over_now_cpu']:.2f}x per CPU second "
          f"({cpu['loop_now']:,.0f} and {cpu['loop_batched']:,.0f} steps per CPU second)")
    own = r["own_episodes"]
    print(f"  ES's own episodes: {own['episodes']} ({own['steps']:,} steps), "
          f"{own['contacts_per_step']:.2f} contacts per step (random actions from the same "
          f"states: {own['contacts_per_step_replayed']['random']:.2f}); their physics costs "
          f"{own['cost_vs_random']:.2f}x random actions' (interleaved in the same processes)")
    cost = own["episode_cost"]
    print(f"  an episode's physics per step, over the mean: {cost['min']:.2f}-{cost['max']:.2f}x "
          f"(coefficient of variation {cost['cv']:.2f}): what leaves one worker's task slower")
    for name, f in r["es_fraction_of_parallel_physics"].items():
        print(f"  ES end to end ({name}) / physics in {r['workers']} processes at once: "
              f"{f:.2f} of random actions', {r['es_fraction_of_own_physics'][name]:.2f} of its "
              f"own episodes'")
    if r["es_theta_same"] is not None:
        print(f"  ES theta bitwise the same as the compared tree's: {r['es_theta_same']}")
    print("  target (issue 37): ES end to end >= 0.80 of its own episodes' physics and >= 0.70 "
          "of random actions', in as many processes as workers")
    return session.done(args, r, rerun="esnb bench rollout")
