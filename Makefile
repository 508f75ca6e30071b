# Two commands set up a fresh machine: `make run` (the dashboard on the demo model) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export WB_CACHE_DIR ?= $(CURDIR)/.wb-cache
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: run test test-all lint bench bench-quick install browser postgres clean demo screenshots mutation

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, on its own: 2.13.0, the CPU wheel, before anything that asks for torch picks another build.
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[test,ui,onnx,fleet]"
	# optimum-intel without its dependencies (pyproject.toml's `hf` extra says why; what it needs is installed above).
	$(BIN)/pip install -q --no-deps "optimum-intel==2.2.0"
	# A real tritonserver (in nvidia-pytriton) and KServe's own models for the export tests. Without their
	# dependencies: those pins (numpy<2, pandas<3, psutil<6) would downgrade this stack, and the parts the
	# tests use need none of them.
	$(BIN)/pip install -q --no-deps "nvidia-pytriton==0.7.0" "kserve==0.21.0"
	touch $(STAMP)

install: $(STAMP)

# Debian's chromium for the browser tests (Playwright drives it; it never downloads a browser).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# Debian's PostgreSQL server binaries for the PostgreSQL store test (the test starts its own server).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		(apt-get update -qq && apt-get install -y -qq postgresql >/dev/null)

# Built once into $(WB_CACHE_DIR)/demos (a rerun finds it there and only copies it: about 2 s); the
# dashboard that `make run` starts reads the same cache, so the page never builds the model itself.
demo: $(STAMP)
	$(BIN)/wb demo-model lenet-digits --out .wb-cache/demo-out >/dev/null

# The dashboard on the demo model, loopback only; `wb dashboard` prints the address.
run: demo
	$(BIN)/wb dashboard --db wb.db --host 127.0.0.1 --port 8866

# Lint first (ruff, rules in pyproject.toml), then the default suite.
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

# WB_NO_SKIPS=1: a skipped default test fails the run (tests/conftest.py lists the CPU-dependent skips allowed).
# Three pytest-xdist workers: most tests wait on a worker process, a server or the browser, so one alone
# leaves a 2-CPU machine half idle, and a third keeps both CPUs busy through those waits (measured in
# docs/testing.md, quiet and with one CPU kept busy by other work).
TEST_WORKERS ?= 3
test: $(STAMP) browser postgres lint
	WB_NO_SKIPS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

test-all: $(STAMP) browser postgres
	$(BIN)/python -m pytest -m ""

# Refresh the README's screenshots from the browser test.
screenshots: $(STAMP) browser
	WB_SCREENSHOTS=$(CURDIR)/docs/screenshots $(BIN)/python -m pytest tests/test_dashboard_tune.py \
		tests/test_dashboard_browser.py tests/test_dashboard_compare.py tests/test_dashboard_capacity.py -m ""

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# Every benchmark table at smoke-test size (a few minutes): checks the scripts, not the machine.
bench-quick: $(STAMP)
	$(BIN)/python benchmarks/run_all.py --quick

# Mutation testing (mutmut) of the modules whose numbers users act on, against their fast tests only.
# Runs in a scratch copy (.mutation/), niced; `make mutation MUTATE_MODULES="... src/wb_core/variants/guard.py"
# MUTATE_TESTS="... tests/test_guard.py"` adds a module. Scores and survivors: docs/testing.md.
MUTATE_MODULES ?= src/wb_core/stats.py src/wb_core/analysis/recommend.py
MUTATE_TESTS ?= tests/test_stats.py tests/test_analysis.py tests/test_recommend_noise.py
mutation: $(STAMP)
	test -x $(BIN)/mutmut || $(BIN)/pip install -q -e ".[mutation]"
	rm -rf .mutation && mkdir -p .mutation/mutants/src && cp -r src tests pyproject.toml .mutation/
	sed -i '/^\[tool.mutmut\]/,$$d' .mutation/pyproject.toml
	printf '[mutmut]\nsource_paths = src\nonly_mutate =\n%s\npytest_add_cli_args_test_selection =\n%s\npytest_add_cli_args =\n    -p\n    no:cacheprovider\n' \
		"$$(printf '    %s\n' $(MUTATE_MODULES))" "$$(printf '    %s\n' $(MUTATE_TESTS))" > .mutation/setup.cfg
	cd .mutation && nice -n 10 env PYTHONPATH=$(CURDIR)/.mutation/mutants/src $(CURDIR)/$(BIN)/mutmut run --max-children 2 > run.log 2>&1 || true
	cd .mutation && $(CURDIR)/$(BIN)/python $(CURDIR)/tools/mutation_score.py

clean:
	rm -rf $(VENV) .wb-cache .pytest_cache .hypothesis .mutation wb.db wb.db-wal wb.db-shm
