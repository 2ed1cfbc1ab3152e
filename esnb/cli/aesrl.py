"""AES-RL: asynchronous ES + TD3 with a shared critic (``esnb.AESRL``).

Defaults are CPU-friendly: 64-64 actor and critic (``--hidden 400 300`` is the paper's).
"""

from __future__ import annotations


def add_arguments(p) -> None:
    from esnb.aes.rules import MEAN_RULES, VARIANCE_RULES

    p.add_argument("--steps", type=float, default=None,
                   help="env steps to run (default 100,000)")
    p.add_argument("--updates", type=int, default=None, help="updates (completions) to run")
    p.add_argument("--mean-rule", choices=tuple(MEAN_RULES), default="relative_baseline")
    p.add_argument("--var-rule", choices=tuple(VARIANCE_RULES), default="online_adaptive")
    p.add_argument("--r", type=float, default=None, help="fixed range (default: Table 5)")
    p.add_argument("--f-b-absolute", type=float, default=None)
    p.add_argument("--f-b-relative", type=float, default=None)
    p.add_argument("--p-desired", type=float, default=None, help="share of RL individuals")
    p.add_argument("--a-noise", type=float, default=0.1, help="action noise (paper: 0.1)")
    p.add_argument("--var-init", type=float, default=1e-3, help="initial variance")
    p.add_argument("--var-floor", type=float, default=1e-5, help="variance floor")
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64],
                   help="actor and critic hidden sizes (paper: 400 300)")
    p.add_argument("--rl-start-step", type=int, default=10_000)
    p.add_argument("--critic-chunk", type=int, default=1000)
    p.add_argument("--mean-evals", type=int, default=5, help="m: episodes per f(mu)")
    p.add_argument("--max-episode-steps", type=int, default=None)


def make_runner(args, client):
    from esnb.runners.aesrl import AESRL

    return AESRL(args.env, seed=args.seed, client=client, mean_rule=args.mean_rule,
                 var_rule=args.var_rule, r=args.r, f_b_absolute=args.f_b_absolute,
                 f_b_relative=args.f_b_relative, p_desired=args.p_desired,
                 a_noise=args.a_noise, var_init=args.var_init, var_floor=args.var_floor,
                 actor_hidden=tuple(args.hidden), critic_hidden=tuple(args.hidden),
                 rl_start_step=args.rl_start_step, critic_chunk=args.critic_chunk,
                 eval_episodes=args.mean_evals, max_episode_steps=args.max_episode_steps,
                 name=args.name)


def load_runner(path, client):
    from esnb.runners.aesrl import AESRL

    return AESRL.load(path, client=client)


def budget(args) -> dict:
    if args.updates is not None:
        return {"updates": args.updates}
    return {"env_steps": 100_000 if args.steps is None else args.steps}
