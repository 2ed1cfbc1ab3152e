"""esnb's IMPALA against RLlib's on ALE/Pong-v5: actor and learner frames/s, and their ratio.

The same workload for both, side by side round after round (``--rounds``, the order of the two
alternating), medians reported:

- **environment**: each side's own Atari recipe, as a user of it builds it: for esnb
  :func:`esnb.envs.make_env` (frame skip 4 with a max over the last two frames, up to 30
  no-ops, grey, 4 frames stacked, ``repeat_action_probability=0``); for RLlib
  ``wrap_atari_for_new_api_stack`` with 4 frames stacked over the same ALE game
  (its frame skip and max, 30 no-ops, a lost life ending an episode, FIRE on reset, frames
  scaled to float32 in [-1, 1] in the environment, channels last): the same emulator frames
  per agent step on both sides, resized to the same side (``--screen-size``: 84, the papers',
  by default);
- **network**: IMPALA's shallow torso for esnb (``torso="auto"``: conv 16 8x8/4, conv 32
  4x4/2, fully connected 256, ReLU; policy and value heads); for RLlib its default CNN encoder
  given the same filters (``conv_filters`` 16 8x8/4, 32 4x4/2, ``head_fcnet_hiddens`` 256):
  the same layers, RLlib's head adds its own value branch;
- **actors**: esnb's ``--workers`` LocalCluster processes, 2 slots of 16 environments each
  (ImpalaConfig's defaults, given on both sides); RLlib as many env-runner processes, each
  stepping ``2 x 16`` environments (the same 64 environments in all);
- **learner**: batch 32 unrolls x 20 steps (640 agent steps per update) for both, CPU only,
  in the driver process (RLlib: ``num_learners=0``);
- **counting**: *agent steps* (each is 4 ALE frames with frame skip 4; multiply by 4 for
  ALE frames). Actor frames/s = agent steps sampled / wall seconds; learner frames/s =
  agent steps trained / wall seconds, over ``--iterations`` timed iterations after one
  warm-up (esnb: an iteration is ``updates_per_iteration`` = 10 learner steps; RLlib: one
  ``algo.train()``, whatever it trained in it).

RLlib runs in its own interpreter (it pins its own gymnasium): the optional extra
``pip install 'esnb[rllib]'`` or a separate environment given by ``--rllib-python``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from esnb.bench.common.flags import add_json
from esnb.bench.common.interpreter import child
from esnb.bench.common.report import Session
from esnb.bench.peers import impala_to_score as to_score
from esnb.bench.peers.versions import peer_versions
from esnb.settings import integer

ENV = "ALE/Pong-v5"
#: ImpalaConfig's defaults, given to both sides: unroll length, unrolls per update, slots per
#: worker, environments per slot
UNROLL, BATCH, SLOTS, ENVS = 20, 32, 2, 16
#: IMPALA's shallow torso as RLlib filters ([channels, kernel, stride]) and head
CONV = [[16, [8, 8], 4], [32, [4, 4], 2]]
HEAD = [256]

MISSING = ("RLlib is not importable by {python}: install the extra there (pip install "
           "'esnb[rllib]') or pass --rllib-python PATH, a python that has ray[rllib]")

#: Ray's error when its node does not start in time, and the RLlib runs tried before giving up
RAY_START_FAILED, ATTEMPTS = "timed out during startup", 5

#: esnb's IMPALA in a fresh interpreter (the arguments of memory.child: mode, workers,
#: iterations, the frames' side, env); SETTINGS (prepended by :func:`esnb_rate`) define
#: UNROLL, BATCH, SLOTS and ENVS
ESNB_CHILD = r'''
import json, logging, sys, time
mode, env = sys.argv[1], sys.argv[5]
workers, iterations, screen = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
from esnb.cluster import make_client
from esnb.runners.impala import Impala
client = make_client(workers, dashboard_address=":0", silence_logs=logging.ERROR)
r = Impala(env, client=client, eval_interval=0, seed=0, name="bench-vs-rllib",
           env_kwargs={"screen_size": screen}, unroll_length=UNROLL, batch_size=BATCH,
           actors_per_worker=SLOTS, envs_per_actor=ENVS)
r.step(1)
h = r.history
steps0, trained0, updates0 = (int(h[c].iloc[-1]) for c in
                              ("env_steps", "frames_trained", "learner_steps"))
t0 = time.perf_counter()
r.step(iterations)
seconds = time.perf_counter() - t0
h = r.history
out = {"sampled": int(h.env_steps.iloc[-1]) - steps0,
       "trained": int(h.frames_trained.iloc[-1]) - trained0,
       "updates": int(h.learner_steps.iloc[-1]) - updates0, "seconds": seconds,
       "unroll": r.config.unroll_length, "batch": r.config.batch_size,
       "envs": r.n_actors * r.config.envs_per_actor, "side": r.spec.torso.in_shape[-1]}
r.close()
client.close()
print("ESNB-BENCH " + json.dumps(out), flush=True)
'''

#: RLlib's IMPALA built in a fresh interpreter (argv: mode, workers, budget, the frames' side,
#: env): ``algo``, and ``find``/``counts`` to read its results. SETTINGS (prepended) define
#: UNROLL, BATCH, ENVS, CONV, HEAD and WINDOW; the program that follows (:data:`RLLIB_RATE`,
#: or :data:`esnb.bench.peers.impala_to_score.RLLIB_CHILD`) trains it.
RLLIB_SETUP = r'''
import json, logging, os, sys, time
workers, screen, env_id = int(sys.argv[2]), int(sys.argv[4]), sys.argv[5]
import gymnasium as gym
import ray
from ray.rllib.algorithms.impala import IMPALAConfig
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.tune.registry import register_env

def creator(cfg):
    # RLlib's own Atari recipe, as its examples build it: the ALE env without gymnasium's
    # frame skip, then wrap_atari_for_new_api_stack (screen x screen grey, max over 4 frames,
    # up to 30 no-ops, a lost life ends an episode, FIRE on reset, 4 frames stacked last)
    import ale_py
    from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack
    gym.register_envs(ale_py)
    return wrap_atari_for_new_api_stack(
        gym.make(env_id, frameskip=1, repeat_action_probability=0.0), dim=screen, framestack=4)

register_env("esnb-pong", creator)


class GameReturns(RLlibCallback):
    # every finished game's whole return and count as lifetime sums, from which the child
    # pools the last WINDOW games itself: RLlib's episode_return_mean held only the games
    # its env runners finished since they last reported (~12 a train() call here), whatever
    # metrics_num_episodes_for_smoothing says
    def on_episode_end(self, *, episode, prev_episode_chunks=None, metrics_logger=None, **kw):
        ret = episode.get_return() + sum(c.get_return() for c in prev_episode_chunks or ())
        metrics_logger.log_value("esnb_game_return_sum", float(ret), reduce="lifetime_sum")
        metrics_logger.log_value("esnb_games", 1, reduce="lifetime_sum")


ray.init(num_cpus=workers + 1, include_dashboard=False, logging_level=logging.ERROR,
         log_to_driver=False)
config = (IMPALAConfig()
          .environment("esnb-pong")
          .framework("torch")
          .env_runners(num_env_runners=workers, num_envs_per_env_runner=ENVS,
                       rollout_fragment_length=UNROLL, num_cpus_per_env_runner=1)
          .learners(num_learners=0, num_gpus_per_learner=0)
          .training(train_batch_size_per_learner=UNROLL * BATCH)
          .rl_module(model_config=DefaultModelConfig(
              conv_filters=CONV, conv_activation="relu", head_fcnet_hiddens=HEAD,
              head_fcnet_activation="relu", vf_share_layers=True))
          .reporting(metrics_num_episodes_for_smoothing=WINDOW)
          .callbacks(GameReturns)
          .debugging(seed=0))
# RLlib's default 0.0 polls the env runners' sample calls with ray.wait(timeout=0), which on
# this machine never saw an episode batch ready (nothing sampled in 55,000 training_step
# calls, BENCHMARKS.md); half a second lets the batches arrive
config.timeout_s_sampler_manager = 0.5
algo = config.build_algo()

def find(d, key):
    # the largest value of ``key`` anywhere in the nested result (where RLlib puts it moves)
    found = [v for k, v in d.items() if k == key and isinstance(v, (int, float))]
    found += [find(v, key) for v in d.values() if isinstance(v, dict)]
    return max(found, default=0)

def counts(res):
    return (int(find(res, "num_env_steps_sampled_lifetime")),
            int(find(res, "num_env_steps_trained_lifetime")))
'''

#: RLlib's rates: one warm-up ``train()``, then ``iterations`` (argv[3]) timed
RLLIB_RATE = r'''
iterations = int(sys.argv[3])
sampled0, trained0 = counts(algo.train())
t0 = time.perf_counter()
for _ in range(iterations):
    res = algo.train()
seconds = time.perf_counter() - t0
sampled, trained = counts(res)
out = {"sampled": sampled - sampled0, "trained": trained - trained0, "seconds": seconds,
       "ray": ray.__version__,
       "params": sum(p.numel() for p in algo.get_module().parameters())}
algo.stop()
ray.shutdown()
print("ESNB-BENCH " + json.dumps(out), flush=True)
'''


def rllib_settings() -> str:
    """The workload both sides are given, as the RLlib programs' first lines."""
    return (f"UNROLL, BATCH, ENVS, CONV, HEAD, WINDOW = {UNROLL}, {BATCH}, {SLOTS * ENVS}, "
            f"{CONV!r}, {HEAD!r}, {to_score.WINDOW}\n")


def add_arguments(p) -> None:
    p.add_argument("--env", default=ENV, help="the Atari game (a gymnasium ALE id)")
    p.add_argument("--workers", type=integer(1), default=2,
                   help="esnb's LocalCluster workers and RLlib's env-runner processes")
    p.add_argument("--rounds", type=integer(1), default=2,
                   help="rounds, each running esnb and RLlib (the order alternates)")
    p.add_argument("--iterations", type=integer(1), default=5,
                   help="timed iterations per run, after one warm-up (esnb: 10 learner "
                        "updates each; RLlib: one algo.train())")
    p.add_argument("--screen-size", type=integer(8), default=84, metavar="PIXELS",
                   help="the frames' side on both sides (84: the papers' and esnb's laptop "
                        "preset's; 42: RLlib's tuned fast Pong's)")
    p.add_argument("--rllib-python", default=sys.executable, metavar="PATH",
                   help="the python that runs RLlib, with the extra installed (pip install "
                        "'esnb[rllib]') (default: this interpreter)")
    p.add_argument("--to-score", type=float, default=None, metavar="SCORE",
                   help="instead of rates: train each side alone, one after the other, until "
                        "its training return (the mean of the last 100 games) passes SCORE "
                        "(-15: Pong's curve well off the floor), and report the wall clock and "
                        "agent steps each took; a Ctrl-C stops the side running and reports its "
                        "curve so far "
                        "[default: none, rates are measured]")
    p.add_argument("--max-steps", type=integer(1), default=8_000_000, metavar="AGENT_STEPS",
                   help="with --to-score: the agent steps after which a side that has not "
                        "passed the score stops (it reports how far it got)")
    p.add_argument("--esnb-run", default=None, metavar="DIR",
                   help="with --to-score: read esnb's side from a run folder trained with the "
                        "laptop preset on this workload (a results seed, e.g. "
                        "docs/results/seeds/impala-pong/seed2) instead of training it again "
                        "[default: none, esnb trains]")
    p.add_argument("--svg", default=None, metavar="PATH",
                   help="with --to-score: also draw both sides' training scores against agent "
                        "steps and minutes into this SVG file [default: none, no figure]")
    add_json(p)


def check_rllib(python: str) -> str:
    """The Ray version ``python`` imports RLlib with; ValueError (one line) if it cannot."""
    code = "import ray, ray.rllib; print(ray.__version__)"
    return peer_versions(python, code, "--rllib-python", MISSING)


def rates(out: dict, workers: int) -> dict:
    """Agent steps/s of the actors (in all and per worker) and of the learner."""
    return {**out, "actor_fps": out["sampled"] / out["seconds"],
            "actor_fps_per_worker": out["sampled"] / out["seconds"] / workers,
            "learner_fps": out["trained"] / out["seconds"]}


def esnb_rate(env: str, workers: int, iterations: int, screen: int = 84) -> dict:
    """esnb's IMPALA on ``env`` in a fresh interpreter: agent steps sampled and trained."""
    settings = f"UNROLL, BATCH, SLOTS, ENVS = {UNROLL}, {BATCH}, {SLOTS}, {ENVS}\n"
    return rates(child("esnb", workers, iterations, screen, env, source=settings + ESNB_CHILD),
                 workers)


def rllib_rate(env: str, workers: int, iterations: int, python: str,
               screen: int = 84) -> dict:
    """RLlib's IMPALA on ``env`` in a fresh ``python``: agent steps sampled and trained."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            out = child("rllib", workers, iterations, screen, env,
                        source=rllib_settings() + RLLIB_SETUP + RLLIB_RATE,
                        python=python)
            break
        except RuntimeError as exc:
            # Ray gives its node a fixed 30 s to start (ray/_private/node.py), which a loaded
            # 2-core machine can miss: again, in a fresh process (the failed one is gone)
            if RAY_START_FAILED not in str(exc) or attempt == ATTEMPTS:
                raise
            print("  (Ray's node did not start within its 30 s; RLlib run again)")
    return {**rates(out, workers), "attempts": attempt}


KEYS = ("actor_fps", "learner_fps")


def measure(env: str = ENV, workers: int = 2, rounds: int = 2, iterations: int = 5,
            python: str = sys.executable, progress=print, screen: int = 84) -> dict:
    version = check_rllib(python)
    runs: dict = {"esnb": [], "rllib": []}
    for r in range(rounds):
        # alternate who goes first: neither always meets the machine after the other
        for name in ("esnb", "rllib") if r % 2 == 0 else ("rllib", "esnb"):
            out = (esnb_rate(env, workers, iterations, screen) if name == "esnb"
                   else rllib_rate(env, workers, iterations, python, screen))
            if not (out["sampled"] and out["trained"]):
                # seen with ray 2.60 on this machine (BENCHMARKS.md): no ratio to print
                raise ValueError(f"{name} sampled {out['sampled']} and trained {out['trained']} "
                                 f"agent steps in {iterations} timed iterations: nothing to "
                                 f"compare (more --iterations?)")
            runs[name].append(out)
            progress(f"round {r + 1}/{rounds} {name}: actors {out['actor_fps']:,.0f}, learner "
                     f"{out['learner_fps']:,.0f} agent steps/s over {out['seconds']:.0f} s")
    med = {name: {k: statistics.median(o[k] for o in runs[name]) for k in KEYS}
           for name in runs}
    return {"env": env, "workers": workers, "rounds": rounds, "iterations": iterations,
            "ray": version, "screen": screen, "unroll": UNROLL, "batch": BATCH,
            "envs": workers * SLOTS * ENVS,
            "rllib_params": runs["rllib"][-1].get("params"), "median": med, "runs": runs,
            "ratio": {k: med["esnb"][k] / med["rllib"][k] for k in KEYS}}


def measure_to_score(env: str = ENV, workers: int = 2, score: float = -15.0,
                     max_steps: int = 8_000_000, python: str = sys.executable,
                     screen: int = 84, esnb_run: str | None = None, progress=print) -> dict:
    """Each side alone to ``score`` (:mod:`esnb.bench.peers.impala_to_score`), esnb first
    (or read from ``esnb_run``), then RLlib. A Ctrl-C stops the side running, keeps its curve
    so far (``stopped``) and reports; a side not started then is None."""
    if esnb_run is not None:
        to_score.history(esnb_run)  # a wrong folder says so before anything runs
    version = check_rllib(python)
    settings = (f"UNROLL, BATCH, SLOTS, ENVS = {UNROLL}, {BATCH}, {SLOTS}, {ENVS}\n")
    if esnb_run is not None:
        ours = to_score.from_run(esnb_run, score, max_steps, progress)
    else:
        ours = to_score.esnb_to_score(env, workers, score, max_steps, screen, settings,
                                      progress)
    # a Ctrl-C that stopped esnb's side stops the bench: RLlib's is not started
    theirs = None if ours.get("stopped") else to_score.rllib_to_score(
        env, workers, score, max_steps, screen, python, rllib_settings(), RLLIB_SETUP, progress)
    return {"env": env, "workers": workers, "score": score, "max_steps": max_steps,
            "window": to_score.WINDOW, "screen": screen, "unroll": UNROLL, "batch": BATCH,
            "envs": workers * SLOTS * ENVS, "ray": version, "esnb": ours, "rllib": theirs}


def run(args) -> int:
    session = Session()
    if args.to_score is not None:
        if args.svg and not Path(args.svg).resolve().parent.is_dir():
            raise ValueError(f"--svg {args.svg}: no folder {Path(args.svg).parent} to write it "
                             f"in (said now, not after the runs)")
        r = measure_to_score(args.env, args.workers, args.to_score, args.max_steps,
                             args.rllib_python, args.screen_size, args.esnb_run)
        print()
        to_score.report(r)
        if args.svg:
            Path(args.svg).write_text(to_score.figure(r))
            print(f"  figure: {args.svg}")
        return session.done(args, r, rerun=f"esnb bench impala-vs-rllib --to-score "
                                           f"{args.to_score:g}")
    if args.esnb_run is not None or args.svg is not None:
        raise ValueError("--esnb-run and --svg belong to --to-score: give --to-score too")
    r = measure(args.env, args.workers, args.rounds, args.iterations, args.rllib_python,
                screen=args.screen_size)
    print()
    print(f"impala-vs-rllib on {r['env']}: agent steps/s (x4 = ALE frames), median of "
          f"{r['rounds']} alternating rounds of {r['iterations']} timed iterations; "
          f"{r['workers']} actor processes, {r['envs']} environments, {r['screen']}x"
          f"{r['screen']} frames, batch {r['batch']} x "
          f"unroll {r['unroll']}; ray {r['ray']}")
    print(f"  {'':<10}{'actors':>12}{'learner':>12}")
    for name in ("esnb", "rllib"):
        m = r["median"][name]
        print(f"  {name:<10}{m['actor_fps']:>12,.0f}{m['learner_fps']:>12,.0f}")
    ratio = r["ratio"]
    print(f"  esnb / RLlib: actors {ratio['actor_fps']:.2f}, learner {ratio['learner_fps']:.2f}")
    return session.done(args, r, rerun="esnb bench impala-vs-rllib")
