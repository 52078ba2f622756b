# Two commands do everything on a fresh machine:
#   make run   -> virtualenv + requirements + BM25 + background build of every system + app on 127.0.0.1
#   make test  -> virtualenv + requirements + the whole test suite (what .ci/run calls)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501
DATASET ?= qqp-bimpm

.PHONY: install run build test bench reproduce clean-artifacts

$(VENV)/.installed: requirements.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-test.txt
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) -m core build --dataset $(DATASET) --systems bm25
	$(PY) -m core build --dataset $(DATASET) --all --background
	QRS_DATASET=$(DATASET) $(PY) -m streamlit run serve.py --server.address 127.0.0.1 --server.port $(PORT)

build: install
	$(PY) -m core build --dataset $(DATASET) --all

# two workers (pytest-xdist), each test file on one of them: every fixture is per test or per worker session
# (own artifacts folder, own PostgreSQL / Milvus / OIDC / Streamlit on free ports)
test: install
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=30

bench: install
	$(PY) -m bench harness

# The default build (timed), the recipes and ablations measured beside it, every report behind BENCHMARKS.md's
# generated tables, then the tables themselves (bench/reports/*.json name their commands): the steps are declared
# in bench/reproduce.py (`python -m bench.reproduce --list`). Each prints its wall time and is written to a ledger
# (var/reproduce/ledger.jsonl), so a second `make reproduce` at the same commit resumes after the last finished
# step; the finished run writes bench/reports/reproduce.json (each step's wall time and their sum). The plan takes
# about seven hours on 2 cores; `make reproduce PART=main|table3|sdml|frm|trecqa` runs one part, which fits a
# working session from a clean clone (it builds the systems its steps read first); reproduce.json adds the parts up.
reproduce: install
	$(PY) -m bench.reproduce --dataset $(DATASET) $(if $(PART),--part $(PART))

clean-artifacts:
	rm -rf var/
