# The two commands: `make run` and `make test`. Both set everything up on a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test check-code suite mutants setup clean

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

setup: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py setupdemo

run: setup
	$(PY) manage.py serve

test: $(STAMP) check-code suite

check-code: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

suite: $(STAMP)
	$(PY) -m pytest

mutants: $(STAMP)
	$(PY) tests/mutants.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache staticfiles
