"""Ape-X DPG: Gaussian-noise actors, one prioritized replay actor, one DPG learner
(``esnb.ApeXDPG``)."""

from __future__ import annotations

from esnb.cli.apex import add_common_arguments, budget, common_kwargs  # noqa: F401


def add_arguments(p) -> None:
    add_common_arguments(p)
    p.add_argument("--actor-lr", type=float, default=None)
    p.add_argument("--critic-lr", type=float, default=None)
    p.add_argument("--actor-hidden", type=int, nargs=2, default=None)
    p.add_argument("--critic-hidden", type=int, nargs=2, default=None)
    p.add_argument("--eviction", choices=("fifo", "priority"), default=None)


def make_runner(args, client):
    from esnb.runners.apex import ApeXDPG

    return ApeXDPG(args.env, seed=args.seed, client=client, actor_lr=args.actor_lr,
                   critic_lr=args.critic_lr, eviction=args.eviction,
                   actor_hidden=None if args.actor_hidden is None else tuple(args.actor_hidden),
                   critic_hidden=None if args.critic_hidden is None
                   else tuple(args.critic_hidden), **common_kwargs(args))


def load_runner(path, client):
    from esnb.runners.apex import ApeXDPG

    return ApeXDPG.load(path, client=client)
