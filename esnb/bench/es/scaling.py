"""ES throughput inline vs on a LocalCluster, and the rollout loop vs raw env stepping.

The same generations (same seed) run in one process and on an N-worker LocalCluster,
interleaved generation by generation so both see the same machine load. Reported: env steps/s
of each and the speed-up, the share of wall time the workers were busy, and the rollout loop's
steps/s (steps / task compute time, policy included) against the raw ``env.step`` rate of the
same environment measured in between. Targets on HalfCheetah-v5 with 2 workers: speed-up >=
1.8x, rollout loop >= 0.8x raw.

Where the cluster's generation goes beyond its tasks' work, from the run's history (over the
timed generations): ``worker_cpu_vs_inline``, the steps a worker's task makes per CPU second
against the inline task's (two processes sharing the machine's caches, a task of half the
episodes); ``task_imbalance``, the median of the slowest task's CPU seconds over the mean
task's (on HalfCheetah an episode's contacts make its physics cost vary ~2x within a
generation, and the generation waits for its slowest task); and ``outside_tasks``, the median
share of a generation's rollout wall time (from sending its tasks to holding their results)
outside its slowest task: sending, scheduling, the results' way back.
"""

from __future__ import annotations

import numpy as np

from esnb.bench.common.flags import add_json, add_settings, chosen, given_settings
from esnb.bench.common.report import Session
from esnb.runners.es.config import ESConfig
from esnb.settings import integer

#: the ESConfig settings offered as flags
FLAGS = ("env", "population")
#: the benchmark's env, not ESConfig's: the targets are HalfCheetah-v5's (fixed 1,000-step
#: episodes, a MuJoCo step's cost)
ENV = "HalfCheetah-v5"


def add_arguments(p) -> None:
    add_settings(p, ESConfig, FLAGS, env=ENV)
    p.add_argument("--generations", type=integer(1), default=6, help="measured generations each")
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster worker processes")
    p.add_argument("--raw-steps", type=integer(1), default=20_000, help="raw steps per measurement")
    add_json(p)


def _raw_rate(cfg, steps: int) -> float:
    from esnb.runners.es.tasks import raw_step_rate

    return raw_step_rate(cfg, steps)["steps_per_s"]


def _steps_per(history, seconds: str) -> float:
    """Env steps of ``history``'s generations after its first over their ``seconds`` column's
    sum: ``gen_time`` gives the run's rate, ``task_cpu`` its tasks' steps per CPU second (a
    task's CPU counts only its own thread: what a slower core, a shared cache or a smaller
    batch changes, not the waits of a preempted worker)."""
    return float(history.env_steps.diff().iloc[1:].sum() / history[seconds].iloc[1:].sum())


def measure(env: str = ENV, generations: int = 6, population: int | None = None,
            workers: int = 2, raw_steps: int = 20_000, progress=print) -> dict:
    """``population`` None: ESConfig's."""
    from esnb.cluster import make_client
    from esnb.runners.es import ES

    # no evaluations: a generation's time is its rollouts and update alone
    cfg = ESConfig.build(env=env, eval_interval=0, **chosen(population=population))
    inline = ES(config=cfg, client=None, name="bench-inline")
    client = make_client(workers, dashboard_address=":0")
    try:
        dist = ES(config=cfg, client=client, name="bench-cluster")
        # warm-up generation each: env creation, imports, first timing estimate
        inline.step(1)
        dist.step(1)
        raw = []
        for g in range(generations):
            raw.append(_raw_rate(inline.rollout_config, raw_steps))
            inline.step(1)
            dist.step(1)
            progress(f"generation {g + 1}/{generations}: inline "
                     f"{inline.records[-1]['steps_per_s']:,.0f} steps/s, cluster "
                     f"{dist.records[-1]['steps_per_s']:,.0f} steps/s")
        hi, hd = inline.history.iloc[1:], dist.history.iloc[1:]
        inline_rate, dist_rate = _steps_per(hi, "gen_time"), _steps_per(hd, "gen_time")
        # the rollout loop's own rate: steps over task compute time (inline: one task a gen)
        loop_rate = float(np.median(hi.steps_per_s / hi.busy))
        same = bool(np.array_equal(inline.theta, dist.theta))
        timed = hd.iloc[1:]
        cpu_inline, cpu_worker = _steps_per(hi, "task_cpu"), _steps_per(hd, "task_cpu")
        imbalance = float(np.median(timed.task_cpu_max / (timed.task_cpu / timed.tasks)))
        outside = float(np.median((timed.gen_time - timed.task_max) / timed.gen_time))
    finally:
        client.close()
    raw_rate = float(np.median(raw))
    return {
        "env": cfg.env,
        "workers": workers,
        "population": cfg.population,
        "generations": generations,
        "inline_steps_per_s": inline_rate,
        "cluster_steps_per_s": dist_rate,
        "speedup": dist_rate / inline_rate,
        "cluster_busy": float(hd.busy.median()),
        "task_imbalance": imbalance,
        "outside_tasks": outside,
        "steps_per_task_cpu": {"inline": cpu_inline, "worker": cpu_worker},
        "worker_cpu_vs_inline": cpu_worker / cpu_inline,
        "rollout_loop_steps_per_s": loop_rate,
        "raw_env_steps_per_s": raw_rate,
        "loop_vs_raw": loop_rate / raw_rate,
        "theta_bitwise_equal": same,
    }


def run(args) -> int:
    session = Session()
    r = measure(generations=args.generations, workers=args.workers, raw_steps=args.raw_steps,
                **given_settings(args, ESConfig, FLAGS))
    print()
    print(f"es-scaling on {r['env']}, population {r['population']}, "
          f"{r['generations']} generations each, interleaved")
    print(f"  inline (1 process)      {r['inline_steps_per_s']:>10,.0f} env steps/s")
    print(f"  LocalCluster {r['workers']} workers  {r['cluster_steps_per_s']:>10,.0f} env steps/s"
          f"   speed-up {r['speedup']:.2f}x (target >= 1.8x)")
    print(f"  workers busy            {r['cluster_busy']:>10.1%} of wall time")
    cpu = r["steps_per_task_cpu"]
    print(f"  steps per task CPU-s    {r['worker_cpu_vs_inline']:>10.3f} on a worker of inline's "
          f"({cpu['worker']:,.0f} against {cpu['inline']:,.0f})")
    print(f"  slowest task / mean     {r['task_imbalance']:>10.3f} (CPU seconds, median)")
    print(f"  outside slowest task    {r['outside_tasks']:>10.1%} of a generation's rollout time")
    print(f"  rollout loop            {r['rollout_loop_steps_per_s']:>10,.0f} steps/s")
    print(f"  raw env.step            {r['raw_env_steps_per_s']:>10,.0f} steps/s"
          f"   loop/raw {r['loop_vs_raw']:.2f} (target >= 0.8)")
    print(f"  theta bitwise equal inline vs cluster: {r['theta_bitwise_equal']}")
    return session.done(args, r, rerun="esnb bench es-scaling")
