"""``import esnb`` registers esnb's gymnasium environments (gymnasium's convention) without
importing gymnasium itself; each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

MAKE = ("import gymnasium as gym\n"
        "for env_id in ('esnb/BitFlip-v0', 'esnb/GridNav-v0'):\n"
        "    gym.make(env_id).close()\n"
        "print('made')\n")


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("code", [
    "import esnb\n" + MAKE,  # esnb first: registered when gymnasium is imported
    MAKE.replace("\n", "\nimport esnb\n", 1),  # gymnasium first: registered by import esnb
    "import esnb, importlib.util\nimportlib.util.find_spec('gymnasium')\n" + MAKE,
], ids=["esnb-then-gymnasium", "gymnasium-then-esnb", "after-a-find-spec"])
def test_import_esnb_registers_its_environments(code):
    p = python(code)
    assert p.returncode == 0 and "made" in p.stdout, p.stderr


def test_import_esnb_imports_no_gymnasium_torch_or_distributed():
    p = python("import sys, esnb\n"
               "print(sorted(m for m in ('gymnasium', 'torch', 'distributed', 'bokeh')"
               " if m in sys.modules))")
    assert p.returncode == 0 and p.stdout.strip() == "[]", (p.stdout, p.stderr)


def test_after_import_runs_every_hook_registered_for_a_module():
    p = python("import sys\n"
               "from esnb.lazy import after_import\n"
               "after_import('colorsys', lambda: print('one'))\n"
               "after_import('colorsys', lambda: print('two'))\n"
               "assert 'colorsys' not in sys.modules\n"
               "import colorsys\n"
               "after_import('colorsys', lambda: print('three'))\n")
    assert p.returncode == 0 and p.stdout.split() == ["one", "two", "three"], p.stderr
