# Two commands do everything on a fresh machine:
#   make run   -> virtualenv + requirements + BM25 + background build of every system + app on 127.0.0.1
#   make test  -> virtualenv + requirements + the whole test suite (what .ci/run calls)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501
DATASET ?= qqp-bimpm

.PHONY: install run build test bench clean-artifacts

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

clean-artifacts:
	rm -rf var/
