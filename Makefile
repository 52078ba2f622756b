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
	$(PY) -m pytest -q --durations=15

bench: install
	$(PY) -m bench harness

# The default build (timed), the recipes and ablations measured beside it, every report behind BENCHMARKS.md's
# generated tables, then the tables themselves (about an hour on 2 cores; bench/reports/*.json name their commands).
RECIPES ?= densetrans@paper-objective,frm@kw-loss,densetrans@-AllDense,densetrans@-TopDense,densetrans@+Concat,sdml-cnn@tl-ssd,sdml-cnn@tl-euc
reproduce: install
	/usr/bin/time -f "%E" -o bench/reports/.build_wall $(PY) -m core build --dataset $(DATASET) --all
	$(PY) -m bench.default_build_report --dataset $(DATASET) --wall "$$(tail -1 bench/reports/.build_wall)" \
	    --load-note "make reproduce: nothing else scheduled"
	$(PY) -m core build --dataset $(DATASET) --systems $(RECIPES)
	$(PY) -m bench.default_build_report --dataset $(DATASET) --variants-only
	$(PY) -m bench.first_stage_train densetrans --variant=-AllDense --threads 2 --tag paper-objective \
	    --set pooling=cls temperature=1.0 dropout=0.1 position_std=0.0
	for v in full -TopDense +Concat -AllDense; do for s in 14 15; do \
	    $(PY) -m bench.first_stage_train densetrans --variant=$$v --threads 2 --tag seed$$s --set seed=$$s || exit 1; \
	done; done
	$(PY) -m bench.densetrans_ablations --dataset $(DATASET) --seeds 13 14 15
	$(PY) -m bench.query_forms --dataset $(DATASET)
	$(PY) -m bench.dev_decisions --dataset $(DATASET) --parts tree-k int8 frm-keyword-loss --seeds 13 14 15
	$(PY) -m bench.frm_pairs --dataset $(DATASET) --seeds 13 14 15
	$(PY) -m bench.cross_encoder_pairs --dataset $(DATASET)
	$(PY) -m bench.layers_curves --out bench/reports/layers_measures_qqp.json
	$(PY) -m bench.layers_curves --pair densetrans:paper-objective densetrans:-AllDense#paper-objective \
	    --sources minilm:cls densetrans:paper-objective densetrans:-AllDense#paper-objective \
	    --out bench/reports/layers_measures_qqp_paper_objective.json
	$(PY) -m bench.milvus_parity --dataset $(DATASET)
	$(PY) -m bench.determinism --dataset $(DATASET) --busy 2
	$(PY) -m bench.determinism --dataset $(DATASET) --busy 1 --systems frm cnn-rerank cross-encoder \
	    --out bench/reports/determinism_rerankers.json
	$(PY) -m bench.text_pipeline
	$(PY) -m bench.seed_tests
	$(PY) -m core build --dataset trecqa --systems cnn-rerank,cnn-rerank@no-features,cnn-rerank@train-all
	for e in trecqa-cnn trecqa-cnn-clean qqp-first-stage qqp-rerank-cnn; do $(PY) -m bench run $$e || exit 1; done
	$(PY) -m bench.tables

clean-artifacts:
	rm -rf var/
