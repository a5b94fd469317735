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

# Benchmarks need the comparison tools (scikit-learn, gensim, TensorLy, matplotlib).
bench: $(STAMP)
	$(PY) -m pip install -e '.[bench]'

clean:
	rm -rf $(VENV) build *.egg-info
