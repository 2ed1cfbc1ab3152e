"""Ape-X DQN: many ε-greedy actors, one prioritized replay actor, one learner (``esnb.ApeX``)."""

from __future__ import annotations


def add_common_arguments(p) -> None:
    """Arguments Ape-X DQN and DPG share."""
    p.add_argument("--seconds", type=float, default=None, help="learning time to run")
    p.add_argument("--learner-steps", type=int, default=None, help="updates to run")
    p.add_argument("--steps", type=float, default=None, help="env steps to run")
    p.add_argument("--num-actors", type=int, default=None, help="actors (own env each)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--target-period", type=int, default=None,
                   help="updates between target copies")
    p.add_argument("--exploration", type=float, default=None,
                   help="DQN: base epsilon; DPG: noise std (fraction of the half-range)")
    p.add_argument("--exploration-alpha", type=float, default=None)
    p.add_argument("--capacity", type=int, default=2 ** 17, help="replay hard capacity")
    p.add_argument("--soft-capacity", type=int, default=None,
                   help="replay soft capacity (default capacity/2)")
    p.add_argument("--min-size", type=int, default=2000, help="items before learning")
    p.add_argument("--samples-per-insert", type=float, default=None,
                   help="rate limit: sampled per inserted transition (actors back off); "
                        "default none for DQN, 16 for DPG; 0: no limit")
    p.add_argument("--eval-interval", type=int, default=1000, help="updates between evals")
    p.add_argument("--target-return", type=float, default=None,
                   help="stop once a greedy evaluation reaches this mean return")
    p.add_argument("--loops", type=int, default=None, help="actor loop tasks")
    p.add_argument("--actor-workers", choices=("all", "others"), default="all",
                   help="'others': keep actor loops off the replay's worker")
    p.add_argument("--max-episode-steps", type=int, default=None)


def add_arguments(p) -> None:
    add_common_arguments(p)
    p.add_argument("--lr", type=float, default=None, help="Adam step size")
    p.add_argument("--hidden", type=int, nargs="+", default=None)


def common_kwargs(args) -> dict:
    kw = dict(batch_size=args.batch_size, target_period=args.target_period,
              exploration=args.exploration, exploration_alpha=args.exploration_alpha,
              capacity=args.capacity, soft_capacity=args.soft_capacity,
              min_size=args.min_size,
              eval_interval=args.eval_interval, target_return=args.target_return,
              loops=args.loops, actor_workers=args.actor_workers,
              max_episode_steps=args.max_episode_steps, name=args.name)
    if args.num_actors is not None:
        kw["num_actors"] = args.num_actors
    if args.samples_per_insert is not None:
        kw["samples_per_insert"] = args.samples_per_insert or None
    return kw


def make_runner(args, client):
    from esnb.runners.apex import ApeX

    return ApeX(args.env, seed=args.seed, client=client, lr=args.lr,
                hidden=None if args.hidden is None else tuple(args.hidden),
                **common_kwargs(args))


def load_runner(path, client):
    from esnb.runners.apex import ApeX

    return ApeX.load(path, client=client)


def budget(args) -> dict:
    if args.steps is not None:
        return {"env_steps": args.steps}
    if args.learner_steps is not None:
        return {"learner_steps": args.learner_steps}
    return {"seconds": 180.0 if args.seconds is None else args.seconds}
