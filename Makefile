# The README's two commands: `make demo` and `make test`. Both bootstrap .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 2024

.PHONY: install demo test lint studio bench graphs clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11'"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]" -c constraints.txt
	touch $(STAMP)

install: $(STAMP)

# DKA over YAGO with the recorded gemma2:9b answers, then the study's tables 5-8 and figures.
demo: $(STAMP)
	$(BIN)/kgcheck run --dataset yago --method dka --model replay:gemma2:9b --out runs/demo-dka-yago --fresh
	$(BIN)/kgcheck reproduce --datasets FactBench,YAGO --out runs/demo-reproduce
	@awk '/^## /{n++} n==1' runs/demo-reproduce/tables.md

test: $(STAMP)
	$(BIN)/python -m pytest -q

# mypy and import-linter read files: they run over a tree of links that lays the repository
# out as the installed kgcheck namespace (tests/package_tree.py).
TREE := $(CURDIR)/build/package-tree
lint: $(STAMP)
	$(BIN)/ruff check graphs retrievers evals kgcheck tests benchmarks prompts vendored
	$(BIN)/python -m tests.package_tree $(TREE) >/dev/null
	cd $(TREE) && $(CURDIR)/$(BIN)/lint-imports $(CURDIR)/pyproject.toml
	cd $(TREE) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p kgcheck

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
