"""OpenAI-ES with a shared noise table (``esnb.ES``)."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--generations", type=int, default=None, help="generations to run")
    p.add_argument("--steps", type=float, default=None, help="env steps to run")
    p.add_argument("--population", type=int, default=40)
    p.add_argument("--sigma", type=float, default=0.02)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=0.005)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    p.add_argument("--shaping", default="centered_ranks")
    p.add_argument("--eval-interval", type=int, default=5)
    p.add_argument("--max-episode-steps", type=int, default=None)
    p.add_argument("--noise-size", type=int, default=None, help="noise table entries")


def make_runner(args, client):
    from esnb.noise import DEFAULT_SIZE
    from esnb.runners.es import ES

    return ES(args.env, population=args.population, sigma=args.sigma, lr=args.lr,
              weight_decay=args.weight_decay, seed=args.seed, client=client,
              hidden=tuple(args.hidden), shaping=args.shaping, eval_interval=args.eval_interval,
              max_episode_steps=args.max_episode_steps,
              noise_size=args.noise_size or DEFAULT_SIZE, name=args.name)


def load_runner(path, client):
    from esnb.runners.es import ES

    return ES.load(path, client=client)


def budget(args) -> dict:
    if args.generations is None and args.steps is None:
        return {"generations": 100}
    if args.steps is not None:
        return {"env_steps": args.steps}
    return {"generations": args.generations}
