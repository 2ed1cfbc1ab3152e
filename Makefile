# Two commands on a fresh machine: `make demo` and `make test` (they install what they need);
# `make lab` opens the tutorials in JupyterLab.
PY ?= python3
PIP ?= $(PY) -m pip

# torch's CPU build. PyPI's Linux torch wheel is the CUDA build, which pulls several GB of
# nvidia-* packages, so torch is installed before esnb (whose bare `torch` requirement is then
# met) in two tries:
# 1. `torch==2.13.0+cpu` through pip's own configuration: found where a local CPU wheel is
#    served (a wheelhouse in pip's find-links, a mirror); PyPI has no +cpu release, so on any
#    other machine this fails at once, without downloading anything;
# 2. otherwise PyTorch's CPU index (the CPU build for Linux, Windows and macOS alike).
# A torch already installed at that release satisfies try 1 and nothing is downloaded.
TORCH ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: install install-test install-lab torch demo test lab lint notebook-filter

torch:
	@$(PIP) install -q "torch==$(TORCH)+cpu" 2>/dev/null \
	  || { echo "no local CPU wheel of torch $(TORCH): installing it from $(TORCH_CPU_INDEX)"; \
	       $(PIP) install "torch==$(TORCH)" --index-url $(TORCH_CPU_INDEX); }

install: torch
	$(PIP) install -e .

install-test: torch
	$(PIP) install -e ".[test]"

install-lab: torch
	$(PIP) install -e ".[lab]"

demo: install
	esnb demo

# -rs: the reason of every skipped test is printed (also set in pyproject.toml's addopts).
# -n 2: two test processes (pytest-xdist). Most tests wait on clusters, kernels and
# subprocesses rather than compute, so two at once finish sooner on 2 cores; the SLURM tests
# share one node and run in one process (--dist loadgroup, their xdist_group).
# More processes do not help here: the slow tests at -n 4 took 1,576 s against 1,403 s at -n 2
# (2026-11-30, one run each, back to back, quiet 2-core machine).
# --durations=30: the 30 slowest tests are listed at the end (where the suite's time goes).
TEST_PROCESSES ?= 2
test: install-test
	$(PY) -m pytest -q -rs -n $(TEST_PROCESSES) --dist loadgroup --durations=30

# JupyterLab (with Dask's panes) on the tutorials, as a user or as root (scripts/lab); saved
# outputs never reach a commit
lab: install-lab notebook-filter
	PY="$(PY)" scripts/lab tutorials

# A git filter that strips outputs and execution counts from notebooks as they are staged
# (cell ids kept: the stored notebooks are exactly what it produces). JupyterLab autosaves
# outputs into the working copy; `git diff` and commits never see them. The filter names the
# interpreter that has nbstripout by its full path, so git works from a shell where that
# environment is not active; it is not `required`, so a removed environment makes git warn
# instead of refusing every command on a notebook (`make lint` refuses stored outputs).
notebook-filter:
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  py="$$($(PY) -c 'import sys; print(sys.executable)')" && \
	  git config filter.nbstripout.clean "'$$py' -m nbstripout --keep-id" && \
	  git config filter.nbstripout.smudge cat && \
	  git config filter.nbstripout.required false && \
	  git config diff.ipynb.textconv "'$$py' -m nbstripout --keep-id -t" && \
	  echo "notebook outputs are stripped when staged (git filter nbstripout with $$py)"; \
	fi

# ruff, and the notebooks as committed: no outputs, no execution counts
lint:
	ruff check .
	$(PY) scripts/check_notebooks.py
