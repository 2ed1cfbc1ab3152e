"""esnb's ES against EvoTorch's on the same workload: env steps/s per core, and their ratio.

The workload is ES's default on HalfCheetah-v5: population 40 (mirrored pairs), ESConfig's
MLP policy (hidden 64, 64, tanh, linear output: 5,702 parameters), observations normalised,
gymnasium's time limit (1,000 steps; HalfCheetah never terminates, so a generation is 40,000
steps for both), no evaluation episodes. Side by side, round after round (``--repeats``, the
order of the two alternating), medians reported:

- **esnb**: :data:`esnb.bench.es.rollout.CHILD` in a fresh interpreter: ``make_client(workers)``
  + ``ES(env)``, 2 warm-up generations, then ``--generations`` timed ones;
- **EvoTorch**: its closest to OpenAI-ES, ``PGPE`` with a fixed standard deviation (σ 0.02,
  ``stdev_learning_rate=0``), Adam (step size 0.01), centered ranks and mirrored sampling,
  ``distributed=True`` on a ``GymNE`` problem with ``num_actors`` = esnb's workers (Ray; each
  actor samples and evaluates its share of the population and sends back a gradient), the same
  network, in a fresh ``--evotorch-python`` interpreter: 2 warm-up generations (Ray's start and
  the actors'), then the same timed generations;
- **physics**: :func:`esnb.bench.es.rollout.physics_rate` (``mj_step`` in a Python loop on
  random actions), alone and in as many processes as workers at once (the contention the
  workers meet); and the **physics of ES's own episodes** (:mod:`esnb.bench.es.own_physics`:
  the timed generations' episodes, recorded once inline with the same seed, their controls
  replayed through ``mj_step``) in as many processes: the limit of these very rollouts.

Rates are env steps per wall second per worker (esnb) or actor (EvoTorch). EvoTorch runs in
its own interpreter because it pins its own torch and pulls in Ray: the optional extra
``pip install 'esnb[evotorch]'``, or a separate environment given by ``--evotorch-python``.
"""

from __future__ import annotations

import statistics
import sys

from esnb.bench.common.flags import add_json, add_settings, given_settings
from esnb.bench.common.interpreter import child
from esnb.bench.common.report import Session
from esnb.bench.es import rollout
from esnb.bench.es.own_physics import OwnEpisodes
from esnb.bench.es.rollout import CHILD, physics_in_parallel, physics_rate
from esnb.bench.peers.versions import peer_versions
from esnb.runners.es.config import ESConfig
from esnb.settings import integer

#: the ESConfig settings offered as flags (the policy stays ESConfig's: CHILD builds ES with it)
FLAGS = ("env", "population")
#: the workload of issue 26's comparison
ENV = "HalfCheetah-v5"
#: warm-up generations before the timed ones (rollout.CHILD runs 2; EvoTorch the same)
WARM_UP = 2

MISSING = ("EvoTorch is not importable by {python}: install the extra there (pip install "
           "'esnb[evotorch]') or pass --evotorch-python PATH, a python that has evotorch and ray")

#: Ray's error when its node does not start in time, and the EvoTorch runs tried before giving up
RAY_START_FAILED, ATTEMPTS = "timed out during startup", 3

#: EvoTorch in a fresh interpreter, taking rollout.CHILD's arguments; SETTINGS (prepended by
#: :func:`evotorch_rate`) define NETWORK, SIGMA, LR, OBS_NORM and WARM_UP
EVOTORCH_CHILD = r'''
import json, logging, sys, time
mode, env = sys.argv[1], sys.argv[5]
actors, gens, pop = (int(a) for a in sys.argv[2:5])
import ray
import evotorch
from evotorch.algorithms import PGPE
from evotorch.neuroevolution import GymNE
logging.getLogger("evotorch").setLevel(logging.WARNING)
problem = GymNE(env, NETWORK, observation_normalization=OBS_NORM, num_actors=actors)
search = PGPE(problem, popsize=pop, center_learning_rate=LR, stdev_learning_rate=0.0,
              stdev_init=SIGMA, optimizer="adam", ranking_method="centered", symmetric=True,
              distributed=True)
for _ in range(WARM_UP):
    search.step()
before = problem.interaction_count
t0 = time.perf_counter()
for _ in range(gens):
    search.step()
seconds = time.perf_counter() - t0
out = {"steps": problem.interaction_count - before, "seconds": seconds,
       "params": problem.solution_length, "version": evotorch.__version__,
       "ray": ray.__version__}
ray.shutdown()
print("ESNB-BENCH " + json.dumps(out), flush=True)
'''


def add_arguments(p) -> None:
    add_settings(p, ESConfig, FLAGS, env=ENV, population=40)
    p.add_argument("--workers", type=integer(1), default=2,
                   help="esnb's LocalCluster workers and EvoTorch's Ray actors")
    p.add_argument("--repeats", type=integer(1), default=3,
                   help="rounds, each running esnb and EvoTorch (the order alternates)")
    # 2: a round is ~2.5 min on a loaded 2-core machine (EvoTorch's generation ~25-45 s)
    p.add_argument("--generations", type=integer(1), default=2,
                   help=f"timed generations per run (after {WARM_UP} warm-up ones)")
    p.add_argument("--steps", type=integer(100), default=20_000,
                   help="steps per physics measurement")
    p.add_argument("--evotorch-python", default=sys.executable, metavar="PATH",
                   help="the python that runs EvoTorch, with the extra installed (pip "
                        "install 'esnb[evotorch]') (default: this interpreter)")
    add_json(p)


def network(es: ESConfig) -> str:
    """ES's MLP policy as an EvoTorch network string (hidden activation, linear output)."""
    act = {"tanh": "Tanh()", "relu": "ReLU()"}[es.activation]
    sizes = ["obs_length", *map(str, es.hidden), "act_length"]
    return f" >> {act} >> ".join(f"Linear({a}, {b})" for a, b in zip(sizes, sizes[1:]))


def check_evotorch(python: str) -> str:
    """The EvoTorch and Ray versions ``python`` imports; ValueError (one line) if it cannot."""
    code = "import evotorch, ray; print(evotorch.__version__, ray.__version__)"
    return peer_versions(python, code, "--evotorch-python", MISSING)


def esnb_rate(env: str, workers: int, generations: int, population: int) -> dict:
    """esnb's ES end to end in a fresh interpreter: steps, seconds, steps/s per worker."""
    out = child("es", workers, generations, population, env, source=CHILD)
    return {**out, "per_core": out["steps"] / out["seconds"] / workers}


def evotorch_rate(env: str, workers: int, generations: int, population: int, es: ESConfig,
                  python: str) -> dict:
    """EvoTorch's distributed PGPE (as OpenAI-ES) in ``python``: steps, seconds, parameters,
    versions, steps/s per actor."""
    settings = (f"NETWORK, SIGMA, LR, OBS_NORM, WARM_UP = {network(es)!r}, {es.sigma!r}, "
                f"{es.lr!r}, {es.obs_norm!r}, {WARM_UP}\n")
    for attempt in range(1, ATTEMPTS + 1):
        try:
            out = child("evotorch", workers, generations, population, env,
                        source=settings + EVOTORCH_CHILD, python=python)
            break
        except RuntimeError as exc:
            # Ray gives its node a fixed 30 s to start, which its agents' imports can miss on
            # a loaded 2-core machine: again, in a fresh process (the failed one is gone)
            if RAY_START_FAILED not in str(exc) or attempt == ATTEMPTS:
                raise
            print("  (Ray's node did not start within its 30 s; EvoTorch run again)")
    return {**out, "per_core": out["steps"] / out["seconds"] / workers, "attempts": attempt}


def esnb_params(es: ESConfig) -> int:
    """Parameters of ES's policy on ``es.env`` (EvoTorch's network must have as many)."""
    import gymnasium as gym

    from esnb.nets import PolicySpec

    env = gym.make(es.env)
    spec = PolicySpec.for_spaces(env.observation_space, env.action_space, es.hidden,
                                 activation=es.activation)
    env.close()
    return spec.num_params


def measure(es: ESConfig, workers: int = 2, repeats: int = 3, generations: int = 2,
            steps: int = 20_000, python: str = sys.executable, progress=print) -> dict:
    versions = check_evotorch(python)
    rates: dict = {k: [] for k in ("physics", "physics_parallel", "physics_own_parallel",
                                   "esnb", "evotorch")}
    steps_per_run: dict = {"esnb": set(), "evotorch": set()}
    params, retries = None, 0
    own_cost: list = []  # own episodes' physics against random actions', same processes
    own = OwnEpisodes(es.env, es.population, WARM_UP, generations)
    for r in range(repeats):
        rates["physics"].append(physics_rate(es.env, steps, seed=r))
        rates["physics_parallel"].append(physics_in_parallel(es.env, steps, workers, seed=r))
        replayed = own.rate(workers)
        rates["physics_own_parallel"].append(replayed["own"])
        own_cost.append(replayed["cost_vs_random"])
        # alternate who goes first: neither always meets the machine after the other
        for name in ("esnb", "evotorch") if r % 2 == 0 else ("evotorch", "esnb"):
            out = (esnb_rate(es.env, workers, generations, es.population) if name == "esnb"
                   else evotorch_rate(es.env, workers, generations, es.population, es, python))
            rates[name].append(out["per_core"])
            steps_per_run[name].add(out["steps"])
            params = out.get("params", params)
            retries += out.get("attempts", 1) - 1
        progress(f"round {r + 1}/{repeats}: " + ", ".join(
            f"{k} {v[-1]:,.0f}" for k, v in rates.items()))
    own.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    own_episodes = {**own.info, "cost_vs_random": statistics.median(own_cost),
                    "cost_vs_random_by_round": own_cost,
                    "contacts_per_step_replayed": replayed["contacts_per_step"]}
    return {"env": es.env, "own_episodes": own_episodes, "population": es.population,
            "workers": workers,
            "generations": generations, "repeats": repeats, "network": network(es),
            "params": {"esnb": esnb_params(es), "evotorch": params},
            "evotorch_ray_versions": versions, "ray_start_retries": retries,
            "steps_per_run": {k: sorted(v) for k, v in steps_per_run.items()},
            "steps_per_s_per_core": med, "rounds": rates,
            "ratio": med["esnb"] / med["evotorch"],
            "ratio_by_round": [a / b for a, b in zip(rates["esnb"], rates["evotorch"])],
            "fraction_of_physics": {k: med[k] / med["physics"] for k in ("esnb", "evotorch")},
            "fraction_of_parallel_physics": {
                k: med[k] / med["physics_parallel"] for k in ("esnb", "evotorch")},
            "fraction_of_own_physics": {
                k: med[k] / med["physics_own_parallel"] for k in ("esnb", "evotorch")}}


LABELS = {**{k: rollout.LABELS[k] for k in ("physics", "physics_parallel",
                                            "physics_own_parallel")},
          "esnb": "esnb ES, per worker",
          "evotorch": "EvoTorch PGPE (distributed), per actor"}


def run(args) -> int:
    session = Session()
    es = ESConfig.build(**given_settings(args, ESConfig, FLAGS))
    r = measure(es, args.workers, args.repeats, args.generations, args.steps,
                args.evotorch_python)
    print()
    print(f"es-vs-evotorch on {r['env']}: env steps/s per core, median of {r['repeats']} "
          f"alternating rounds; population {r['population']} on {r['workers']} workers/actors, "
          f"timed generations per run: {r['generations']}; policy {r['params']['esnb']:,} "
          f"parameters (EvoTorch's: {r['params']['evotorch']:,}); evotorch, ray "
          f"{r['evotorch_ray_versions']}")
    physics = r["steps_per_s_per_core"]["physics"]
    for key, rate in r["steps_per_s_per_core"].items():
        print(f"  {LABELS[key]:<42}{rate:>10,.0f}   {rate / physics:.2f} of the physics")
    by_round = ", ".join(f"{x:.2f}" for x in r["ratio_by_round"])
    print(f"  esnb / EvoTorch: {r['ratio']:.2f} (by round: {by_round})")
    par = r["fraction_of_parallel_physics"]
    own = r["fraction_of_own_physics"]
    print(f"  of the physics in {r['workers']} processes at once: esnb {par['esnb']:.2f}, "
          f"EvoTorch {par['evotorch']:.2f}; of the physics of ES's own episodes: esnb "
          f"{own['esnb']:.2f}, EvoTorch {own['evotorch']:.2f} ({r['own_episodes']['episodes']} "
          f"episodes, {r['own_episodes']['contacts_per_step']:.2f} contacts per step, their "
          f"physics {r['own_episodes']['cost_vs_random']:.2f}x random actions')")
    return session.done(args, r, rerun="esnb bench es-vs-evotorch")
