# BERT's family: every command a reader, student, instructor or CI needs. See README.md.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PORT   ?= 8000
# make lab: the folder JupyterLab opens, and anything else to pass it (e.g. LAB_ARGS="--no-browser");
# make lab STUDENT=1 writes the student version (make student) and opens student/ instead of book/.
# As root (containers, cloud machines, CI) JupyterLab refuses to start unless told: --allow-root is added.
STUDENT  ?=
LAB_DIR  ?= $(if $(STUDENT),student,book)
LAB_ARGS ?=
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
# make test runs its tests on JOBS pytest-xdist workers (a notebook's cells stay together on one).
# Three on two cores: a third of the suite waits (kernels starting, sandboxes, the browser), and a third
# worker fills those waits (measured: 559 s with two, 500 s with three, this machine, same commit)
JOBS   ?= 3
NOTEBOOKS = $(shell $(BIN)/python -m tools.nb list)
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=600

.PHONY: help setup lock book book-public serve lab lint test unit pretrain notebooks colab-check binder-check execute benchmark bench student check clean

help:
	@echo "make book       set up .venv if needed, build the website into _build/html"
	@echo "make book-public the website without the exercise's solutions, into _build/public/_build/html"
	@echo "make serve      serve _build/html on http://localhost:$(PORT)"
	@echo "make lab        open the lessons (book/) in JupyterLab, in the course's environment"
	@echo "make lab STUDENT=1  write the student version (make student) and open it (student/) instead"
	@echo "make test       lint, unit tests, nbval over every notebook, strict build of the book"
	@echo "make lint       ruff over the package, tests and tools; mypy over the grader (both configured in pyproject.toml)"
	@echo "make unit       lint, then the unit tests only (no notebook, no book build): the fast gate"
	@echo "make pretrain   retrain the checkpoints of lessons 1-4 and 6, the course model and its students among them (about 5 hours)"
	@echo "make colab-check every notebook alone on Colab's package set, installed by its own Colab cell (CI)"
	@echo "make binder-check every notebook in an environment built from environment.yml + postBuild"
	@echo "make execute    re-execute notebooks in place (NB=book/01_dynamic_masking.ipynb for one)"
	@echo "make benchmark  time and peak memory of every notebook, each in a fresh kernel"
	@echo "make bench      the full benchmark: benchmarks/results.json, .md and the appendix page"
	@echo "make student    write the student version of the exercise into student/ (FORCE=1 over one that differs)"
	@echo "make setup      create .venv and install the course with its book and test tools (versions: requirements-lock.txt)"
	@echo "make lock       re-resolve pyproject.toml's extras in a fresh venv and rewrite requirements-lock.txt"
	@echo "make notebooks  nbval over the notebooks only (NB=book/02_distillation.ipynb for one)"
	@echo "make clean      remove the built website and the student version (_build/, student/)"
	@echo "make check      fast static checks: lint, Colab cells, environment.yml"

# The virtual environment is (re)made only when pyproject.toml changed since the last install.
# uv installs the same versions as pip (checked: the same `pip list`) in 40 s instead of 90; it does
# not read pip's configuration, so pip's find-links (where a machine keeps its torch wheel) are passed
# on. Where uv fails, pip installs as before. pip and uv themselves come from the lock too (an unpinned
# uv took a release of the day before CI ran, and the lock test failed on it). --compile-bytecode, as
# pip does: without the .pyc files,
# where PYTHONDONTWRITEBYTECODE is set (as on these machines), every process and kernel of make test
# would compile torch and transformers from source (their import: 16 s instead of 6).
UV_LINKS = $(foreach d,$(PIP_FIND_LINKS),--find-links $(d))
# The versions come from requirements-lock.txt (constraints: what CI tested); make lock rewrites it from
# a fresh resolution of pyproject.toml's extras (then run make test before committing it).
LOCK := requirements-lock.txt
$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv -c $(LOCK)
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -e '.[book,test]' -c $(LOCK) $(UV_LINKS) \
		|| $(BIN)/python -m pip install -q -e '.[book,test]' -c $(LOCK)
	touch $(STAMP)

lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install -q uv
	.lock-venv/bin/uv pip install -q --python .lock-venv/bin/python -e '.[book,test]' $(UV_LINKS)
	{ grep '^#' $(LOCK); .lock-venv/bin/uv pip freeze -q --python .lock-venv/bin/python --exclude-editable \
		| sed 's/^torch==\([0-9.]*\)+cpu$$/torch==\1/'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK) && rm -rf .lock-venv
	@echo "$(LOCK) rewritten: make test, then commit it"

setup: $(STAMP)

book: $(STAMP)
	rm -rf _build/html _build/.doctrees _build/jupyter_execute
	$(BIN)/jupyter-book build . --keep-going
	@echo "The website: $(CURDIR)/_build/html/index.html"

# The website as a class may see it: the exercise without its solutions (page, .ipynb download,
# _sources, search index); tools/public_book.py then greps every file it built for solution text.
book-public: $(STAMP)
	$(BIN)/python -m tools.public_book --out _build/public

serve: book
	@echo "Serving on http://localhost:$(PORT) (Ctrl-C stops)"
	$(BIN)/python -m http.server $(PORT) --directory _build/html

# The lessons in JupyterLab, run by the course's own .venv (its python3 kernel has bertfamily and
# the pinned torch). JupyterLab is the `lab` extra of pyproject.toml, installed here on first use,
# so that CI and Colab, which never open it, stay lighter.
# STUDENT=1: the student version is written once; a student/ copy that exists (your work) is opened as it is.
ROOT_NOTE := make lab: running as root (uid 0), so JupyterLab is started with --allow-root
lab: $(STAMP)
	@$(BIN)/python -c "import jupyterlab" 2>/dev/null || $(BIN)/python -m pip install -q -e '.[lab]'
	@if [ -n "$(STUDENT)" ]; then if [ -f student/exercise_distilbert.ipynb ]; then \
		echo "make lab: opening student/ as it is (your work there is kept; make student refreshes it)"; \
		else $(MAKE) -s student; fi; fi
	@$(if $(LAB_ROOT),echo "$(ROOT_NOTE)")
	$(BIN)/jupyter lab --notebook-dir=$(LAB_DIR) $(LAB_ROOT) $(LAB_ARGS)

# Unit tests, then every notebook of _toc.yml under nbval; tests/test_book.py builds the book
# strictly (-W, from an empty output folder). One pytest run, so it ends with pytest's summary;
# JOBS=1 runs it in one process. -rfEs: the closing summary names every failed test, so that the
# benchmark's tail of the output (make bench) says which one failed.
lint: $(STAMP)
	$(BIN)/ruff check lib tools benchmarks tests conftest.py
	$(BIN)/ruff format --check lib tools benchmarks tests conftest.py
	$(BIN)/mypy

# (The lessons' format is checked by tests/test_nb_format.py inside the run: not a second time before it.)
test: $(STAMP) lint
	$(BIN)/python -m tools.nb colab-cell --check
	$(BIN)/python -m tools.nb environment --check
	$(BIN)/python -m pytest tests $(NOTEBOOKS) $(NBVAL) -p no:cacheprovider -rfEs -n $(JOBS) --dist loadfile --durations=15

unit: $(STAMP) lint
	$(BIN)/python -m pytest tests -p no:cacheprovider -m "not book and not slow" -n $(JOBS)

notebooks: $(STAMP)
	$(BIN)/python -m pytest $(if $(NB),$(NB),$(NOTEBOOKS)) $(NBVAL) -p no:cacheprovider

# Every notebook as a reader elsewhere runs it (tools/standalone.py): a fresh venv with Colab's
# package set (tools/colab-manifest.toml; torch: the local CPU wheel), the notebook alone in an empty
# folder, its first cell installing the course as on Colab, which must keep every package the
# manifest lists. .ci/run runs it after make test. binder-check: a venv from environment.yml + postBuild.
colab-check: $(STAMP)
	$(BIN)/python -m tools.standalone $(NB)

binder-check: $(STAMP)
	$(BIN)/python -m tools.standalone --binder $(NB)

# lessons 1-4 and 6 evaluate models trained longer than a lesson may run: tools/pretrain.py runs the
# experiments of bertfamily.checkpoints and writes their weights and logs into lib/bertfamily/checkpoints/
# (then re-execute those notebooks)
pretrain: $(STAMP)
	$(BIN)/python -m tools.pretrain

execute: $(STAMP)
	$(BIN)/python -m tools.nb execute $(NB)

benchmark: $(STAMP)
	$(BIN)/python -m tools.nb benchmark $(NB)

# Every notebook, masking, book builds and the whole `make test` (its measured wall time,
# `make_test`) into lib/bertfamily/results/benchmark.json and .md; then
# the appendix page, which reads that result, is re-executed so that it shows the new numbers.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run --make-test --skip-unit
	$(BIN)/python -m tools.nb execute book/running.ipynb

student: $(STAMP)
	$(BIN)/python -m bertfamily.grading student book/exercise_distilbert.ipynb student/exercise_distilbert.ipynb \
		$(if $(FORCE),--force)

# Fast static checks, all inside the repository: lint, the Colab cells and environment.yml agree
# with their sources. (Maintainers with the workplace's shared/ folder beside the clone also get
# its course_check; nobody else needs it.)
check: lint
	$(BIN)/python -m tools.nb colab-cell --check
	$(BIN)/python -m tools.nb environment --check
	$(BIN)/python -m tools.nb format --check
	@if [ -f ../shared/tools/course_check.py ]; then $(BIN)/python ../shared/tools/course_check.py --strict; fi

clean:
	rm -rf _build student
