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

lint: $(STAMP)
	$(BIN)/ruff check graphs retrievers evals kgcheck tests benchmarks
	$(BIN)/mypy graphs evals kgcheck retrievers prompts

studio: $(STAMP)
	LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=true LANGSMITH_TRACING=false \
		$(BIN)/langgraph dev --host 127.0.0.1 --port $(PORT) --no-browser

graphs: $(STAMP)
	$(BIN)/kgcheck graph docs --out-dir docs/graphs

bench: $(STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f; done

clean:
	rm -rf $(VENV) runs .pytest_cache
