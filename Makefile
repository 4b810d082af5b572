# neardup: `make help` lists the targets. The README and CI call these.
.DEFAULT_GOAL := help
PY ?= python3

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

install:  ## build and install the package (release build of the Rust core)
	$(PY) -m pip install -q .

dev:  ## editable install with every extra (rebuilds the Rust core)
	$(PY) -m pip install -q -e ".[all]"

setup-test:  ## install what the tests need: apt packages, the package, test tools
	bash scripts/setup-test.sh

test: setup-test  ## install test dependencies, then lint, run Rust and Python tests
	$(MAKE) lint
	cargo test --release -p neardup-core
	$(PY) -m pytest -q

lint:  ## ruff, mypy, stubtest, cargo fmt, clippy
	$(PY) -m ruff check python tests benches
	$(PY) -m ruff format --check python tests benches
	$(PY) -m mypy python/neardup tests benches
	$(PY) -m mypy.stubtest neardup._core
	cargo fmt --all --check
	cargo clippy --all-targets -- -D warnings

fmt:  ## format Rust and Python
	cargo fmt --all
	$(PY) -m ruff format python tests benches

bench-deps:  ## install the peers and the real-text corpora (Debian packages) the benchmarks use
	bash scripts/setup-bench.sh

bench: bench-deps  ## run every benchmark (prints ratios to peers)
	for b in benches/*.py; do case $$b in */corpus.py|*/_*) ;; *) $(PY) $$b || exit 1;; esac; done

.PHONY: help install dev setup-test test lint fmt bench-deps bench
