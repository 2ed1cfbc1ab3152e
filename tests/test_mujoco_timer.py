"""MuJoCo's engine timer is off in esnb's processes, the physics keeps its bits, and esnb's own
timing columns still work (esnb.envs.mujoco_timer)."""

import json
import os
import subprocess
import sys

import numpy as np

PROBE = r'''
import json, sys
import mujoco, numpy as np
from esnb.envs.mujoco_timer import timer_installed
before = timer_installed()
from esnb.envs import make_env
env = make_env("Hopper-v5").unwrapped
env.reset(seed=1)
model, data = env.model, env.data
rng = np.random.default_rng(0)
for a in rng.uniform(-1, 1, (200, model.nu)):
    data.ctrl[:] = a
    mujoco.mj_step(model, data, nstep=4)
step = data.timer[int(mujoco.mjtTimer.mjTIMER_STEP)]
print("ESNB-PROBE " + json.dumps({"before": before, "after": timer_installed(),
                                  "number": int(step.number), "duration": float(step.duration),
                                  "qpos": data.qpos.tolist(), "qvel": data.qvel.tolist()}))
'''


def _probe(**env) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=300)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("ESNB-PROBE "))
    return json.loads(line.split(" ", 1)[1])


def test_make_env_turns_the_timer_off_and_the_physics_keeps_its_bits():
    off = _probe()
    on = _probe(DASK_ESNB__MUJOCO__TIMER="true")
    # the bindings install a timer; esnb's make_env takes it out, unless told to keep it
    assert off["before"] and not off["after"]
    assert on["before"] and on["after"]
    # MuJoCo still counts its stages; only the clock is gone
    assert off["number"] == on["number"] == 200 * 4  # a count per substep
    assert off["duration"] == 0.0 and on["duration"] > 0.0
    # the same states, bit for bit
    assert off["qpos"] == on["qpos"] and off["qvel"] == on["qvel"]


def test_a_timer_a_user_set_is_kept():
    code = ("import mujoco, time; mujoco.set_mjcb_time(time.perf_counter); "
            "from esnb.envs.mujoco_timer import timer_off; print('ESNB-OFF', timer_off())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "ESNB-OFF False" in out.stdout


def test_esnb_timing_columns_work_with_the_timer_off():
    from esnb import ES
    from esnb.envs.mujoco_timer import timer_installed

    es = ES("HalfCheetah-v5", population=4, max_episode_steps=30, noise_size=200_000,
            eval_interval=1, eval_episodes=1, seed=0)
    try:
        es.step(2)
        assert not timer_installed()
        h = es.history
        for column in ("steps_per_s", "gen_time", "task_max", "task_cpu", "wall_time"):
            values = h[column].to_numpy(dtype=float)
            assert np.isfinite(values).all() and (values > 0).all(), (column, values)
    finally:
        es.close()
