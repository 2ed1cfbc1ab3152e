"""LocalCluster workers forked from esnb's preloaded forkserver (issue 26): they hold the rollout
stack before their first task, ignore the driver's group signals from their first instruction,
get the nanny's pre-spawn environment, stay lean; turned off, workers are spawned as before.
Each case runs in a fresh interpreter (the server is launched when esnb.cluster is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each case starts a cluster

PROBE = r"""
import json, logging, os, signal, sys
from esnb.cluster import make_client
client = make_client(2, dashboard_address=":0", silence_logs=logging.ERROR)

def probe():
    import os, sys
    import psutil
    with open(f"/proc/{os.getpid()}/status") as f:
        mask = int(next(ln for ln in f if ln.startswith("SigIgn:")).split()[1], 16)
    return {"parent": " ".join(psutil.Process(os.getppid()).cmdline()),
            "me": " ".join(psutil.Process().cmdline()),
            "ignored": [s for s in (2, 15) if mask >> (s - 1) & 1],
            "omp": os.environ.get("OMP_NUM_THREADS"),
            "modules": sorted(m for m in ("gymnasium", "mujoco", "esnb.runners.es.tasks",
                                          "torch", "pandas", "bokeh", "esnb.cluster")
                              if m in sys.modules)}

out = {"workers": list(client.run(probe).values()),
       "driver_ignores": [s for s in (signal.SIGINT, signal.SIGTERM)
                          if signal.getsignal(s) is signal.SIG_IGN],
       "mark": os.environ.get("ESNB_FORKSERVER_CHILD")}
client.close()
print("PROBE " + json.dumps(out))
"""


def probe(**env) -> dict:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                       timeout=300, env={**os.environ, **env})
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("PROBE ")), None)
    assert line is not None, p.stderr[-3000:]
    return json.loads(line[len("PROBE "):])


def test_workers_are_forked_from_the_preloaded_server():
    out = probe()
    assert len(out["workers"]) == 2
    for w in out["workers"]:
        assert "multiprocessing.forkserver" in w["parent"] and "spawn_main" not in w["me"]
        # the rollout stack was imported by the server, before any task; nothing heavy
        assert {"esnb.runners.es.tasks", "gymnasium", "mujoco"} <= set(w["modules"])
        assert not {"torch", "pandas", "bokeh"} & set(w["modules"])
        assert w["ignored"] == [2, 15]  # SIGINT, SIGTERM: from the first instruction
        assert w["omp"] == "1"  # dask's pre-spawn environment reached the forked worker
    # the driver handles its signals again, and its environment has no trace of the server's
    assert out["driver_ignores"] == [] and out["mark"] is None


def test_turned_off_workers_are_spawned():
    out = probe(DASK_ESNB__CLUSTER__FORKSERVER="false")
    assert len(out["workers"]) == 2
    for w in out["workers"]:
        assert "spawn_main" in w["me"] and "forkserver" not in w["parent"]
        assert w["ignored"] == [2, 15]
        assert not {"torch", "pandas", "bokeh", "mujoco"} & set(w["modules"])
