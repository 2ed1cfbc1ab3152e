# Two commands on a fresh machine: `make demo` and `make test` (they install what they need).
PY ?= python3
PIP ?= $(PY) -m pip

.PHONY: install install-test demo test lint

# torch first, from the CPU build: a bare `torch` requirement would pull a multi-GB CUDA build
install:
	$(PIP) install torch==2.13.0
	$(PIP) install -e .

install-test:
	$(PIP) install torch==2.13.0
	$(PIP) install -e ".[test]"

demo: install
	esnb demo

test: install-test
	$(PY) -m pytest -q

lint:
	ruff check .
