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
    p.add_argument("--iw-k", default="0",
                   help="IW-ES: importance-weighted updates per batch, or 'auto'")
    p.add_argument("--iw-k-max", type=int, default=10, help="most IW updates with --iw-k auto")
    p.add_argument("--iw-clip", type=float, default=1.0, help="clip of the importance weights")
    p.add_argument("--iw-ess-threshold", type=float, default=0.5,
                   help="ESS/n an IW update needs with --iw-k auto")
    p.add_argument("--iw-normalize", choices=("sum", "n"), default="sum")


def make_runner(args, client):
    from esnb.runners.es import ES

    iw_k = args.iw_k if args.iw_k == "auto" else _int(args.iw_k, "--iw-k")
    runner = ES(args.env, population=args.population, sigma=args.sigma, lr=args.lr,
                weight_decay=args.weight_decay, seed=args.seed, client=client,
                hidden=tuple(args.hidden), shaping=args.shaping,
                eval_interval=args.eval_interval, max_episode_steps=args.max_episode_steps,
                noise_size=args.noise_size, name=args.name, iw_k=iw_k,
                iw_k_max=args.iw_k_max)
    runner.controls.set(iw_clip=args.iw_clip, iw_ess_threshold=args.iw_ess_threshold,
                        iw_normalize=args.iw_normalize)
    return runner


def _int(text: str, flag: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{flag} must be an integer or 'auto', got {text!r}") from None


def load_runner(path, client):
    from esnb.runners.es import ES

    return ES.load(path, client=client)


def budget(args) -> dict:
    if args.generations is None and args.steps is None:
        return {"generations": 100}
    if args.steps is not None:
        return {"env_steps": args.steps}
    return {"generations": args.generations}
