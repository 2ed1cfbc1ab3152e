"""Security: loopback by default, TLS as one setting, checkpoints that never unpickle.

The other checkpoint refusals (another algorithm, damaged bytes, altered arrays, theta of the
wrong size, object arrays in ``__meta__``) are in ``test_es_reproducible.py``.
"""

import asyncio
import io
import logging
import zipfile
from urllib.parse import urlparse

import dask.config
import numpy as np
import psutil
import pytest
from distributed import Client
from distributed.security import Security

from esnb.cluster import make_client, make_security
from esnb.record import CheckpointError, load_checkpoint, save_checkpoint
from esnb.runners.es import ES

CFG = dict(env="CartPole-v1", population=8, sigma=0.05, lr=0.03, seed=5, eval_interval=1,
           eval_episodes=2, noise_size=1_000_000)


def _listening(pids):
    return {(c.laddr.ip, c.laddr.port) for c in psutil.net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.pid in pids}


def test_local_cluster_and_dashboard_listen_on_loopback_only():
    # ":0" names a port only: it must not mean every interface
    c = make_client(2, dashboard_address=":0", set_as_default=False, actor_worker=True,
                    silence_logs=logging.ERROR)
    try:
        c.wait_for_workers(3, timeout=60)
        me = psutil.Process()
        sockets = _listening({me.pid} | {p.pid for p in me.children(recursive=True)})
        dash = urlparse(c.dashboard_link)
        assert dash.hostname == "127.0.0.1"
        assert ("127.0.0.1", dash.port) in sockets
        # scheduler, dashboard, 3 nannies and 3 workers at least, all on loopback
        assert len(sockets) >= 8
        assert {ip for ip, _ in sockets} == {"127.0.0.1"}, sockets
    finally:
        c.close()


async def _plain_tcp_identity(address: str) -> dict:
    """Ask ``address`` who it is over plain TCP (what a TLS scheduler must refuse)."""
    from distributed.comm import connect

    comm = await connect(address, timeout="3s")
    try:
        await comm.write({"op": "identity", "reply": True})
        return await asyncio.wait_for(comm.read(), 5)
    finally:
        comm.abort()


def test_tls_cluster_is_one_setting_and_gives_the_same_run():
    with dask.config.set({"esnb.cluster.security": "temporary"}):
        c = make_client(2, dashboard_address=":0", set_as_default=False,
                        silence_logs=logging.ERROR)
    try:
        assert c.scheduler.address.startswith("tls://127.0.0.1:")
        workers = c.scheduler_info()["workers"]
        assert len(workers) == 2 and all(a.startswith("tls://") for a in workers)
        r = ES(**CFG, client=c)
        r.step(3)
        inline = ES(**CFG, client=False)
        inline.step(3)
        assert np.array_equal(r.theta, inline.theta)
        # without the certificates nobody gets in
        with pytest.raises(Exception):  # noqa: B017 - TypeError, OSError or TimeoutError
            Client(c.scheduler.address, security=Security(), timeout="3s")
        # a plain-TCP peer: refused at the handshake (a raw comm, not a Client: a Client
        # starts its own IO-loop thread, which once failed to start within distributed's 10 s
        # on this loaded 2-core machine, an AssertionError unrelated to security)
        with pytest.raises(OSError):  # CommClosedError is an OSError
            asyncio.run(_plain_tcp_identity(c.scheduler.address.replace("tls://", "tcp://")))
    finally:
        c.close()


def test_security_settings():
    assert make_security(None) is None and make_security("none") is None
    sec = make_security("temporary")
    assert sec.require_encryption and sec.tls_ca_file.startswith("-----BEGIN")
    assert make_security(sec) is sec
    files = make_security({"tls-ca-file": "ca.pem", "tls-client-cert": "c.pem",
                           "tls-client-key": "k.pem"})
    assert files.tls_ca_file == "ca.pem" and files.require_encryption
    with pytest.raises(ValueError, match="distributed.comm.tls.ca-file"):
        make_security("config")
    with pytest.raises(ValueError, match="'temporary', 'config'"):
        make_security("yes please")


# -- checkpoints and replay snapshots never unpickle ------------------------------------------
class _Trap:
    """Unpickling this creates a file: the proof that a loader ran code from a checkpoint."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _npy(array, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def _trap_checkpoints(tmp_path, good):
    """Copies of ``good`` with a pickle that would create ``trap`` in the meta or an array."""
    trap = tmp_path / "trap"
    evil = _npy(np.array([_Trap(trap)], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    paths = []
    for member in ("__meta__.npy", sorted(n for n in members if n != "__meta__.npy")[0]):
        path = tmp_path / f"evil-{member}.npz"
        with zipfile.ZipFile(path, "w") as z:
            for name, data in members.items():
                z.writestr(name, evil if name == member else data)
        paths.append(path)
    return trap, paths


def test_checkpoints_never_unpickle(tmp_path):
    r = ES(**CFG, client=False)
    r.step(1)
    good = r.save(tmp_path / "ck.npz")
    trap, paths = _trap_checkpoints(tmp_path, good)
    for path in paths:
        with pytest.raises(CheckpointError, match="damaged or not an esnb checkpoint"):
            ES.load(path)
        with pytest.raises(CheckpointError):
            load_checkpoint(path)
    assert not trap.exists()


def test_replay_snapshots_never_unpickle_and_are_not_es_checkpoints(tmp_path):
    from esnb.replay.server import ReplayServer
    from esnb.replay.transfer import local_call, pull, push

    config = {"capacity": 64, "prioritized": True}
    server = ReplayServer(config, seed=0, switch_interval=None)
    server.add({"obs": np.arange(20, dtype=np.float32).reshape(10, 2),
                "action": np.arange(10, dtype=np.int64)})
    snap = tmp_path / "replay.npz"
    pull(local_call(server), snap)

    def restored(path):
        new = ReplayServer(config, switch_interval=None)
        push(local_call(new), path)
        return new

    assert len(restored(snap).buffer) == 10

    trap, paths = _trap_checkpoints(tmp_path, snap)
    for path in paths:
        with pytest.raises(CheckpointError):
            restored(path)
    assert not trap.exists()

    # a snapshot is not a run, and a run is not a snapshot
    with pytest.raises(CheckpointError, match="holds a 'replay' run, not 'ES'"):
        ES.load(snap)
    r = ES(**CFG, client=False)
    r.step(1)
    with pytest.raises(CheckpointError, match="holds a 'ES' run, not 'replay'"):
        restored(r.save(tmp_path / "es.npz"))


@pytest.mark.parametrize("name, bad", [
    ("adam_exp_avg", np.zeros(1, np.float32)),  # would broadcast silently at the next step
    ("adam_exp_avg_sq", np.zeros(3, np.float32)),
    ("obs_sumsq", np.zeros(2)),
    ("adam_step", np.zeros(2)),
])
def test_es_checkpoint_with_misshapen_state_is_refused_at_load(tmp_path, name, bad):
    r = ES(**CFG, client=False)
    r.step(2)
    meta, arrays = load_checkpoint(r.save(tmp_path / "ck.npz"), "ES")
    arrays[name] = bad  # consistent digest: the file is intact but does not fit the run
    save_checkpoint(tmp_path / "bad.npz", "ES", meta, arrays)
    with pytest.raises(CheckpointError, match="does not match a ES run"):
        ES.load(tmp_path / "bad.npz")


def test_es_checkpoint_declaring_another_environment_is_refused(tmp_path):
    r = ES(**CFG, client=False)
    r.step(1)
    meta, arrays = load_checkpoint(r.save(tmp_path / "ck.npz"), "ES")
    meta["config"]["env"] = "Pendulum-v1"  # the meta says Pendulum, the arrays are CartPole's
    save_checkpoint(tmp_path / "bad.npz", "ES", meta, arrays)
    with pytest.raises(CheckpointError, match="does not match a ES run"):
        ES.load(tmp_path / "bad.npz")
