# The few commands a newcomer needs. `make run` and `make test` work on a fresh machine.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml requirements.lock | cksum | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: run test lint bench setup system-deps translations editor editor-check clean screenshots \
	lock scale-test gpu-check gpu-wheels

run: setup
	$(PY) -m app serve --host $(HOST) --port $(PORT)

test: setup
	# One worker more than cores: a grading's waits (a hang's timeout, a rank's start) leave a core
	# idle that the extra worker uses. One rerun: a grading run on a loaded 2-core box can miss its
	# wall clock; a rerun shows as R.
	$(PY) -m pytest -n $$(( $$(nproc) + 1 )) --dist loadgroup --reruns 1 --durations=30 $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy app grader

bench: setup
	$(PY) -m benchmarks

# The whole stack for real: Docker engine, images, compose, a worker killed (README "Running at scale").
scale-test: setup
	scripts/scale/run.sh

# Re-pin requirements.lock after editing pyproject.toml's dependencies (needs uv on PATH).
lock:
	uv pip compile pyproject.toml --all-extras --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --find-links /opt/wheels --no-emit-find-links \
	  --custom-compile-command "make lock" -q -o requirements.lock
	# The CPU wheel's local label off: the same pin then fits the CUDA build of the GPU image.
	sed -i 's/^torch==\([0-9.]*\)+cpu$$/torch==\1/' requirements.lock

# The GPU path on a GPU host (its own python3 and torch; README "The GPU check"); CPU=1: the same
# table on CPU workers in the venv, as CI runs it.
gpu-check: $(if $(filter 1,$(CPU)),setup,)
	CPU=$(CPU) scripts/gpu/check.sh

# The wheels gpu-check installs on a GPU host without network, into .gpu-wheels/ (needs pip).
gpu-wheels:
	scripts/gpu/wheels.sh

setup: $(STAMP) system-deps translations

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# Pinned first: an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c requirements.lock -e '.[web,grader,dev]'
	rm -f $(VENV)/.installed-*
	touch $@

system-deps:
	@scripts/install-system-deps.sh

translations: $(STAMP)
	@if [ -d app/locales ]; then $(VENV)/bin/pybabel -q compile -d app/locales -D messages; fi

# Desktop and phone screenshots of the learner's pages (and a live submission) for review.
screenshots: setup
	$(PY) scripts/screenshots.py --out screenshots

editor:
	cd static/editor-src && npm ci --no-audit --no-fund && npm run build

editor-check:
	scripts/check-editor-bundle.sh

clean:
	rm -rf $(VENV) rendezvous.db
