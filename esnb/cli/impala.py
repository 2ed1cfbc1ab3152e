"""IMPALA with V-trace: decoupled actors on Dask, one learner (``esnb.Impala``)."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--learner-steps", type=int, default=None, help="learner steps to run")
    p.add_argument("--steps", type=float, default=None, help="env steps (actor frames) to run")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--entropy-cost", type=float, default=0.01)
    p.add_argument("--baseline-cost", type=float, default=0.5)
    p.add_argument("--unroll-length", type=int, default=20, help="T")
    p.add_argument("--batch-size", type=int, default=32, help="B (unrolls per learner step)")
    p.add_argument("--clip-rho", type=float, default=1.0, help="rho bar")
    p.add_argument("--clip-pg-rho", type=float, default=1.0, help="rho bar of the pg term")
    p.add_argument("--clip-c", type=float, default=1.0, help="c bar")
    p.add_argument("--correction", choices=("vtrace", "none"), default="vtrace")
    p.add_argument("--actor-lag", type=int, default=0,
                   help="inject lag: actors get parameters this many versions old")
    p.add_argument("--discount", type=float, default=0.99)
    p.add_argument("--reward-scale", type=float, default=1.0)
    p.add_argument("--obs-norm", choices=("auto", "on", "off"), default="auto",
                   help="observation normalisation (auto: on for Box actions)")
    p.add_argument("--optimizer", choices=("adam", "rmsprop"), default="adam")
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    p.add_argument("--envs-per-actor", type=int, default=16)
    p.add_argument("--actors-per-worker", type=int, default=2)
    p.add_argument("--eval-interval", type=int, default=100, help="learner steps")
    p.add_argument("--max-episode-steps", type=int, default=None)


def make_runner(args, client):
    import torch

    from esnb.runners.impala import Impala

    torch.set_num_threads(1)  # the command owns this process: the cores are the actors'
    obs_norm = {"auto": None, "on": True, "off": False}[args.obs_norm]
    return Impala(args.env, client=client, seed=args.seed, lr=args.lr,
                  entropy_cost=args.entropy_cost, baseline_cost=args.baseline_cost,
                  unroll_length=args.unroll_length, batch_size=args.batch_size,
                  clip_rho_threshold=args.clip_rho, clip_pg_rho_threshold=args.clip_pg_rho,
                  clip_c_threshold=args.clip_c, correction=args.correction,
                  actor_lag=args.actor_lag, discount=args.discount,
                  reward_scale=args.reward_scale, obs_norm=obs_norm, optimizer=args.optimizer,
                  hidden=tuple(args.hidden), envs_per_actor=args.envs_per_actor,
                  actors_per_worker=args.actors_per_worker, eval_interval=args.eval_interval,
                  eval_episodes=max(1, args.eval_episodes),
                  max_episode_steps=args.max_episode_steps, name=args.name)


def load_runner(path, client):
    from esnb.runners.impala import Impala

    return Impala.load(path, client=client)


def budget(args) -> dict:
    if args.learner_steps is None and args.steps is None:
        return {"learner_steps": 1000}
    if args.steps is not None:
        return {"env_steps": args.steps}
    return {"learner_steps": args.learner_steps}
