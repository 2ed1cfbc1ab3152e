"""The Binder environment (``binder/``): its package list resolves, and ``binder/start`` sets
the small-pod configuration that esnb and dask then really use.

repo2docker (what mybinder.org runs) is not available here, so the requirements are resolved by
pip into a fresh virtual environment (no system site-packages), as repo2docker does from the
repository's root. The one change: PyTorch's CPU index line is dropped, and ``torch`` is pinned
to the same release, which this machine's pip configuration serves as its local CPU wheel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
REQUIREMENTS = BINDER / "requirements.txt"

#: what the Binder image must contain (normalised project names)
EXPECTED = {"esnb", "torch", "jupyterlab", "ipywidgets", "jupyterlab-widgets", "jupyter-bokeh",
            "dask-labextension", "jupyter-server-proxy", "dask", "distributed", "bokeh",
            "gymnasium", "mujoco",
            "imageio", "imageio-ffmpeg", "pygame"}  # esnb[video]: tutorials 01 and 05's videos
#: Debian packages repo2docker installs from binder/apt.txt: MuJoCo's headless EGL rendering
APT = {"libegl1", "libegl-mesa0", "libgl1-mesa-dri", "libopengl0"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_lines() -> list[str]:
    lines = []
    for raw in REQUIREMENTS.read_text().splitlines():
        line = raw.split(" #")[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def _runtime_python() -> tuple[int, int]:
    text = (BINDER / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-(\d+)\.(\d+)", text)
    assert m, f"binder/runtime.txt must read python-X.Y, got {text!r}"
    return int(m.group(1)), int(m.group(2))


def test_binder_files_ask_for_cpu_torch_and_the_lab_extensions():
    lines = _requirement_lines()
    torch = [ln for ln in lines if re.match(r"torch\b", ln)]
    assert torch and all("+cpu" in ln for ln in torch), (
        "Binder must pin a CPU build of torch (a CUDA build does not fit a 1-2 GB pod)")
    assert any(ln.startswith("--extra-index-url") and "/whl/cpu" in ln for ln in lines), (
        "the +cpu torch wheels live on PyTorch's CPU index")
    assert ".[video]" in lines, "esnb itself (the repository) with its video extra"
    named = {_norm(re.split(r"[<>=!~\[; ]", ln)[0]) for ln in lines
             if not ln.startswith(("-", "."))}
    assert {"jupyterlab", "jupyter-bokeh", "dask-labextension", "jupyter-server-proxy"} <= named
    assert os.access(BINDER / "start", os.X_OK), "binder/start must be executable"
    _runtime_python()


def test_binder_start_configures_threads_a_small_noise_table_and_the_proxied_dashboard(
        tmp_path):
    # the script runs a real Python that makes esnb's client the way a notebook would
    code = textwrap.dedent("""
        import json, os
        import esnb
        from esnb import config
        client = esnb.make_client(dashboard_address=":0")
        try:
            runner = esnb.ES("CartPole-v1", population=4, client=client)
            info = client.scheduler_info(n_workers=-1)
            print(json.dumps({
                "processes": config.get("cluster.processes"),
                "n_workers": len(info["workers"]),
                "worker_kinds": sorted({type(w).__name__
                                        for w in client.cluster.workers.values()}),
                "noise_size": runner.noise_config.size,
                "link": client.dashboard_link,
                "port": client.cluster.scheduler.http_server.port,
                "omp": os.environ.get("OMP_NUM_THREADS"),
            }))
        finally:
            client.close()
    """)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DASK_", "JUPYTERHUB_")) and k not in ("OMP_NUM_THREADS",)}
    env["JUPYTERHUB_SERVICE_PREFIX"] = "/user/someone/"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    out = subprocess.run([str(BINDER / "start"), sys.executable, "-c", code], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["processes"] is False
    assert got["n_workers"] == 2
    # workers live in this very process (a Nanny would mean a worker process of its own)
    assert got["worker_kinds"] == ["Worker"]
    assert got["noise_size"] < 25_000_000 and got["noise_size"] >= 1_000_000
    assert got["link"] == f"/user/someone/proxy/{got['port']}/status"
    assert got["omp"] == "1"

    # a plain `jupyter lab` (no JupyterHub) gets the server's own /proxy/ path
    env.pop("JUPYTERHUB_SERVICE_PREFIX")
    probe = "import dask; print(dask.config.get('distributed.dashboard.link'))"
    out = subprocess.run([str(BINDER / "start"), sys.executable, "-c", probe], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "/proxy/{port}/status"

    # `exec "$@"`: the command's exit status and arguments come through unchanged
    out = subprocess.run([str(BINDER / "start"), sys.executable, "-c",
                          "import sys; print(sys.argv[1:]); sys.exit(3)", "a b", "c"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 3 and out.stdout.strip() == "['a b', 'c']"


@pytest.mark.slow
def test_binder_requirements_resolve_in_a_fresh_venv(tmp_path):
    want = _runtime_python()
    if sys.version_info[:2] == want:
        python = sys.executable
    else:
        python = shutil.which(f"python{want[0]}.{want[1]}")
        if python is None:
            pytest.skip(f"binder/runtime.txt asks for Python {want[0]}.{want[1]}, "
                        f"which is not on this machine")

    # the repository as repo2docker sees it (a copy: pip builds a local project in place)
    src = tmp_path / "repo"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "esnb", src / "esnb",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    lines = []
    for line in _requirement_lines():
        if line.startswith("--extra-index-url"):
            continue  # PyTorch's index: this machine serves the same CPU wheel locally
        m = re.fullmatch(r"torch==([\w.]+)\+cpu", line)
        if m:
            line = f"torch=={m.group(1)}"
        lines.append(line)
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("\n".join(lines) + "\n")

    # a fresh environment (none of this interpreter's site-packages) with a current pip, as
    # repo2docker's images have: the pip that ensurepip bundles resolves this list ~2x slower
    # (measured: 163 s against 72 s; it waits on one index page at a time), and ensurepip
    # itself takes 10-40 s here. pip's wheel runs from the file to install itself.
    t0 = time.monotonic()
    env_dir = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(env_dir)], check=True,
                   timeout=300)
    vpy = env_dir / "bin" / "python"
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_USER")}
    t_venv = time.monotonic()
    wheels = tmp_path / "pip-wheel"
    out = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                          "--only-binary", ":all:", "--dest", str(wheels), "pip"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (pip_wheel,) = wheels.glob("pip-*.whl")
    out = subprocess.run([str(vpy), str(pip_wheel / "pip"), "install", "--quiet", "--no-index",
                          "--no-compile",
                          str(pip_wheel)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    t_pip = time.monotonic()
    # repo2docker runs pip from the repository's root, where `.` is esnb
    out = subprocess.run([str(vpy), "-m", "pip", "install", "--dry-run", "--quiet",
                          "--report", str(report), "-r", str(reqs)],
                         cwd=src, env=env, capture_output=True, text=True, timeout=500)
    t_resolve = time.monotonic()
    assert out.returncode == 0, f"binder/requirements.txt does not resolve:\n{out.stderr[-4000:]}"

    data = json.loads(report.read_text())
    assert data["environment"]["python_version"] == f"{want[0]}.{want[1]}"
    found = {_norm(item["metadata"]["name"]): item for item in data["install"]}
    missing = EXPECTED - set(found)
    assert not missing, f"not in the resolved environment: {sorted(missing)}"
    # esnb resolved from the repository itself, with its own dependencies satisfied
    assert found["esnb"]["download_info"]["url"] == src.as_uri()
    major = int(found["jupyterlab"]["metadata"]["version"].split(".")[0])
    assert major >= 4, "JupyterLab 4: the lab extensions ship prebuilt (no node build on Binder)"
    print(f"\nresolved {len(found)} packages; torch {found['torch']['metadata']['version']}, "
          f"jupyterlab {found['jupyterlab']['metadata']['version']} (venv {t_venv - t0:.0f} s, "
          f"pip {t_pip - t_venv:.0f} s, resolution {t_resolve - t_pip:.0f} s)")


def test_binder_installs_headless_rendering_as_ci_does():
    apt = set((BINDER / "apt.txt").read_text().split())
    assert apt == APT
    ci = (ROOT / ".ci" / "run").read_text()
    assert all(package in ci for package in APT)


def test_readme_has_the_binder_badge_and_links_every_tutorial_and_notebook():
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]"
                     r"\(https://mybinder\.org/v2/gh/[\w.-]+/esnb/HEAD\?labpath=tutorials\)",
                     readme), "README.md needs the Binder badge opening tutorials/"
    links = set(re.findall(r"\]\(((?:tutorials|notebooks)/[^)\s]+\.ipynb)\)", readme))
    missing_files = sorted(link for link in links if not (ROOT / link).is_file())
    assert not missing_files, f"README.md links notebooks that do not exist: {missing_files}"
    notebooks = {str(p.relative_to(ROOT)) for d in ("tutorials", "notebooks")
                 for p in (ROOT / d).glob("*.ipynb")}
    assert not notebooks - links, f"README.md does not link {sorted(notebooks - links)}"
