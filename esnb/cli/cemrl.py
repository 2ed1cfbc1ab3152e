"""CEM-RL, serial or parallel-synchronous (``esnb.CEMRL``).

Defaults are CPU-friendly: 64-64 actor and critic (``--hidden 400 300`` is the paper's).
"""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--steps", type=float, default=None,
                   help="env steps to run (default 100,000)")
    p.add_argument("--generations", type=int, default=None)
    p.add_argument("--parallel", action="store_true",
                   help="P-CEM-RL: evaluate each generation in parallel on the cluster")
    p.add_argument("--pop-size", type=int, default=10)
    p.add_argument("--a-noise", type=float, default=0.0, help="action noise (CEM-RL: 0)")
    p.add_argument("--var-init", type=float, default=1e-3)
    p.add_argument("--variance-form", choices=("code", "paper"), default="code",
                   help="sep-CEM variance with the released code's extra 1/K_e, or eq. 2")
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64],
                   help="actor and critic hidden sizes (paper: 400 300)")
    p.add_argument("--rl-start-step", type=int, default=10_000)
    p.add_argument("--eval-interval", type=int, default=1)
    p.add_argument("--max-episode-steps", type=int, default=None)


def make_runner(args, client):
    from esnb.runners.cemrl import CEMRL

    return CEMRL(args.env, seed=args.seed, client=client, parallel=args.parallel,
                 pop_size=args.pop_size, a_noise=args.a_noise, var_init=args.var_init,
                 variance_form=args.variance_form, actor_hidden=tuple(args.hidden),
                 critic_hidden=tuple(args.hidden), rl_start_step=args.rl_start_step,
                 eval_interval=args.eval_interval, max_episode_steps=args.max_episode_steps,
                 name=args.name)


def load_runner(path, client):
    from esnb.runners.cemrl import CEMRL

    return CEMRL.load(path, client=client)


def budget(args) -> dict:
    if args.generations is not None:
        return {"generations": args.generations}
    return {"env_steps": 100_000 if args.steps is None else args.steps}
