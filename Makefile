# Two commands do everything on a fresh machine:
#   make run   -> virtualenv + requirements + BM25 + background build of every system + app on 127.0.0.1
#   make test  -> virtualenv + requirements + the whole test suite (what .ci/run calls)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501
DATASET ?= qqp-bimpm

.PHONY: install run build test bench reproduce clean-artifacts

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) -m core build --dataset $(DATASET) --systems bm25
	$(PY) -m core build --dataset $(DATASET) --all --background
	QRS_DATASET=$(DATASET) $(PY) -m streamlit run app.py --server.address 127.0.0.1 --server.port $(PORT)

build: install
	$(PY) -m core build --dataset $(DATASET) --all

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) -m bench

# The default build, then every report behind BENCHMARKS.md's generated tables, then the tables themselves.
reproduce: install
	$(PY) -m core build --dataset $(DATASET) --all
	$(PY) -m bench.default_build_report --dataset $(DATASET)
	$(PY) -m bench.query_forms --dataset $(DATASET)
	$(PY) -m bench.text_pipeline
	$(PY) -m bench.tables

clean-artifacts:
	rm -rf var/
