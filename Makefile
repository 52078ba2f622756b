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
# generated tables, then the tables themselves (bench/reports/*.json name their commands). Every step prints its
# wall time ("[reproduce] SECONDS s: COMMAND", GNU time) so the cost of each is on the console.
STEP := /usr/bin/time -f "[reproduce] %e s: %C"
RECIPES ?= densetrans@paper-objective,frm@kw-loss,densetrans@-AllDense,densetrans@-TopDense,densetrans@+Concat,sdml-cnn@tl-ssd,sdml-cnn@tl-euc
reproduce: install
	/usr/bin/time -f "%E" -o bench/reports/.build_wall $(PY) -m core build --dataset $(DATASET) --all
	$(STEP) $(PY) -m bench.default_build_report --dataset $(DATASET) --wall "$$(tail -1 bench/reports/.build_wall)" \
	    --load-note "make reproduce: nothing else scheduled"
	$(STEP) $(PY) -m core build --dataset $(DATASET) --systems $(RECIPES)
	$(STEP) $(PY) -m bench.default_build_report --dataset $(DATASET) --variants-only
	$(STEP) $(PY) -m bench.first_stage_train densetrans --variant=-AllDense --threads 2 --tag paper-objective \
	    --set pooling=cls temperature=1.0 dropout=0.1 position_std=0.0
	# Table 3's seeds 14-17: two trainings at a time, one thread each (more throughput on 2 cores than one at 2)
	for s in 14 15 16 17; do for v in full -TopDense +Concat -AllDense; do echo "$$v $$s"; done; done | \
	    xargs -P 2 -L 1 sh -c '$(STEP) $(PY) -m bench.first_stage_train densetrans --variant=$$0 --threads 1 --tag seed$$1 --set seed=$$1'
	$(STEP) $(PY) -m bench.recipe_seeds densetrans-ablations --dataset $(DATASET) --seeds 13 14 15 16 17
	# SDML against its triplet-loss baselines over five seeds (seed 13: the default build and RECIPES)
	for s in 14 15 16 17; do for v in sdml tl-ssd tl-euc; do echo "$$v $$s"; done; done | \
	    xargs -P 2 -L 1 sh -c '$(STEP) $(PY) -m bench.first_stage_train sdml-cnn --variant=$$0 --threads 1 --tag seed$$1 --set seed=$$1'
	$(STEP) $(PY) -m bench.recipe_seeds sdml-losses --dataset $(DATASET) --seeds 13 14 15 16 17
	$(STEP) $(PY) -m bench.query_forms --dataset $(DATASET)
	$(STEP) $(PY) -m bench.dev_decisions --dataset $(DATASET) --parts tree-k int8 frm-keyword-loss --seeds 13 14 15
	$(STEP) $(PY) -m bench.frm_pairs --dataset $(DATASET) --seeds 13 14 15
	$(STEP) $(PY) -m bench.cross_encoder_pairs --dataset $(DATASET)
	$(STEP) $(PY) -m bench.layers_curves --out bench/reports/layers_measures_qqp.json
	$(STEP) $(PY) -m bench.layers_curves --pair densetrans:paper-objective densetrans:-AllDense#paper-objective \
	    --sources minilm:cls densetrans:paper-objective densetrans:-AllDense#paper-objective \
	    --out bench/reports/layers_measures_qqp_paper_objective.json
	$(STEP) $(PY) -m bench.milvus_parity --dataset $(DATASET)
	$(STEP) $(PY) -m bench.determinism --dataset $(DATASET) --busy 2
	$(STEP) $(PY) -m bench.determinism --dataset $(DATASET) --busy 1 --systems frm cnn-rerank cross-encoder \
	    --out bench/reports/determinism_rerankers.json
	$(STEP) $(PY) -m bench.text_pipeline
	$(STEP) $(PY) -m bench.seed_tests --extra full,-AllDense
	$(STEP) $(PY) -m bench.seed_tests --report sdml_losses.json --metric hit_rate@1 --order sdml tl-ssd tl-euc --extra sdml,tl-euc
	$(STEP) $(PY) -m core build --dataset trecqa --systems cnn-rerank,cnn-rerank@no-features,cnn-rerank@train-all
	$(STEP) $(PY) -m bench.ppi_simulation --systems bm25,bm25@anserini-default,glove-mean --judge cnn-rerank \
	    --draws 1000 --choose-prior-df
	for e in trecqa-cnn trecqa-cnn-clean qqp-first-stage qqp-sdml qqp-rerank-cnn qqp-tree qqp-tree-all; do $(STEP) $(PY) -m bench run $$e || exit 1; done
	$(STEP) $(PY) -m bench.tables

clean-artifacts:
	rm -rf var/
