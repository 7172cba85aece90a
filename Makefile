# kiln: `make demo` runs the seed's multiply_them end to end; `make test` runs every test.
# Both set up what they need on a fresh machine (NumPy and pytest come from the registry when
# they are missing; on a machine without network they must already be installed).
# `make sanitize` runs the C tests and pytest again under ASan and UBSan; `make fuzz` runs the
# libFuzzer targets; `make lint` the checks CI enforces. Each has its section below.

PYTHON    ?= python3
# The interpreter everything runs with, PY: $(PYTHON) itself when it already has NumPy, pytest
# and setuptools (the GPU machine's, which has no network); otherwise, or with KILN_USE_VENV=1,
# a virtual environment made from it in $(KILN_VENV), with --system-site-packages so that what
# the system has stays visible. deps installs what is missing there, never into the system's
# interpreter (which on Debian and Ubuntu refuses: externally-managed-environment).
# KILN_EXTRAS: further packages deps installs (CI: dask, distributed).
KILN_VENV ?= .venv
KILN_EXTRAS ?=
HAVE_DEPS := $(shell $(PYTHON) -c 'import numpy, pytest, setuptools' 2>/dev/null && echo yes)
ifeq ($(HAVE_DEPS)$(KILN_USE_VENV),yes)
PY = $(PYTHON)
else
PY = $(abspath $(KILN_VENV))/bin/python
endif
CUDA_HOME ?= /usr/local/cuda
CC        ?= cc

include engine/sources.mk

# The warning flags, spelled out once; the build is warning-free with them.
KILN_WARNINGS = -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
                -Wpointer-arith -Wformat=2 -Wundef -Wcast-align -Wwrite-strings
export KILN_WARNINGS

CFLAGS   ?= -O2 -g
CPPFLAGS += -Iengine/include -isystem $(CUDA_HOME)/include
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC $(KILN_WARNINGS) $(CFLAGS)
LDLIBS   += -lcrypto -ldl -lpthread

BUILD   = build
OBJS    = $(KILN_ENGINE_SOURCES:%.c=$(BUILD)/%.o)
HEADERS = $(wildcard engine/include/*.h engine/src/*.h)
CTESTS  = $(wildcard tests/c/*.c)
EXT     = pymod/kiln/_kiln$(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# The package, then what deps-wheels installed from the wheelhouse (an absent folder is no harm).
PYENV   = PYTHONPATH=$(CURDIR)/pymod:$(CURDIR)/$(WHEEL_SITE)$${PYTHONPATH:+:$$PYTHONPATH}

.PHONY: all lib ext deps deps-notebook deps-wheels wheelhouse valgrind demo test test-c test-py pycuda-suite pycuda-examples bench bench-detail bench-cpu gpu-check sanitize fuzz fuzz-cc clean \
        lint lint-build lint-layers lint-format lint-tools format

all: lib ext

lib: $(BUILD)/libkiln.a $(BUILD)/libkiln.so $(BUILD)/kiln-nvrtc

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libkiln.a: $(OBJS)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/libkiln.so: $(OBJS)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/kiln-nvrtc: $(KILN_HELPER_SOURCE) $(BUILD)/libkiln.a
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $< $(BUILD)/libkiln.a $(LDLIBS) -o $@

$(BUILD)/test_engine: $(CTESTS) $(wildcard tests/c/*.h) $(BUILD)/libkiln.a
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -DKILN_SOURCE_DIR='"$(CURDIR)"' $(CTESTS) \
	    $(BUILD)/libkiln.a $(LDLIBS) -o $@

# NumPy and pytest from the registry when missing (the GPU machine has both and no network),
# into the virtual environment when there is one. venv needs Debian's python3-venv, installed
# as fuzz-cc installs clang when it is missing.
deps:
ifneq ($(PY),$(PYTHON))
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(KILN_VENV) || { \
	    echo "deps: $(PYTHON) -m venv failed; trying apt-get install -y python3-venv"; \
	    apt-get install -y python3-venv && $(PYTHON) -m venv --system-site-packages $(KILN_VENV); }
endif
	@$(PY) -c 'import numpy, pytest, setuptools' 2>/dev/null || \
	    $(PY) -m pip install --quiet numpy pytest setuptools
	@$(if $(strip $(KILN_EXTRAS)),$(PY) -m pip install --quiet $(KILN_EXTRAS),true)

# What the notebook tests need (IPython, and a Jupyter kernel run through nbclient), from the
# registry when missing. Not needed to build or use kiln, so a machine without network goes on
# without them and those tests skip, naming what is missing.
deps-notebook: deps-wheels
	@PYTHONPATH=$(CURDIR)/$(WHEEL_SITE) $(PY) -c 'import IPython, ipykernel, nbclient, nbformat' \
	    2>/dev/null || \
	    $(PY) -m pip install --quiet --retries 1 --timeout 15 ipython ipykernel nbclient \
	        nbformat || \
	    echo "deps-notebook: could not install ipython, ipykernel, nbclient, nbformat;" \
	         "the notebook tests will skip"

# ---- A wheelhouse for a machine without network ----------------------------------------------
# The GPU machine has no network and lacks what the notebook tests (IPython, ipykernel,
# nbclient, nbformat) and the Dask tests (dask, distributed) need. `make wheelhouse`, run where
# a registry is reachable, downloads them with every dependency, as wheels for CPython
# WHEEL_PYTHON on manylinux x86_64, into $(WHEELS) (git-ignored; carried to that machine with
# the tree). There deps-wheels, part of `make test` and so of `make gpu-check`, installs them
# from it offline (pip --no-index) into $(WHEEL_SITE), which the tests' PYTHONPATH names, the
# Jupyter kernels and Dask workers they start included: no interpreter is changed, an
# externally managed one neither. It does nothing without the folder, or when the packages
# import already.
WHEELS          ?= wheels
WHEEL_PYTHON    ?= 3.12
WHEEL_PACKAGES   = ipython ipykernel nbclient nbformat dask distributed
WHEEL_IMPORTS    = IPython, ipykernel, nbclient, nbformat, dask, distributed
# manylinux2014 (glibc 2.17) first, the widest; 2.28 only where a package has nothing older.
WHEEL_PLATFORMS  = manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_28_x86_64
# One folder per interpreter (cpython-312): another one's compiled modules would not load.
PY_CACHE_TAG    := $(shell $(PYTHON) -c 'import sys; print(sys.implementation.cache_tag)')
WHEEL_SITE       = $(BUILD)/wheel-site-$(PY_CACHE_TAG)

wheelhouse:
	$(PYTHON) -m pip download --quiet --dest $(WHEELS) --only-binary=:all: \
	    --implementation cp --python-version $(WHEEL_PYTHON) \
	    $(WHEEL_PLATFORMS:%=--platform %) $(WHEEL_PACKAGES)
	@echo "wheelhouse: $$(ls $(WHEELS)/*.whl | wc -l) wheels, $$(du -sh $(WHEELS) | cut -f1)"

deps-wheels: deps
	@test -d $(WHEELS) || exit 0; \
	PYTHONPATH=$(CURDIR)/$(WHEEL_SITE) $(PY) -c 'import $(WHEEL_IMPORTS)' 2>/dev/null && exit 0; \
	echo "deps-wheels: installing $(WHEEL_PACKAGES) from $(WHEELS) into $(WHEEL_SITE)"; \
	$(PY) -m pip install --quiet --no-index --find-links $(WHEELS) --upgrade \
	    --target $(WHEEL_SITE) $(WHEEL_PACKAGES) || \
	    echo "deps-wheels: $(WHEELS) does not serve $$($(PY) -V) (it was made for" \
	         "$(WHEEL_PYTHON)); tests whose packages are missing will skip"

ext: $(EXT)

$(EXT): $(KILN_ENGINE_SOURCES) $(HEADERS) $(wildcard pymod/_kiln/*.c pymod/_kiln/*.h) setup.py | deps
	$(PY) setup.py --quiet build_ext --inplace --build-temp $(BUILD)/ext

demo: ext
	$(PYENV) $(PY) -m kiln demo

test: test-c test-py

test-c: $(BUILD)/test_engine $(BUILD)/kiln-nvrtc
	$(BUILD)/test_engine

test-py: ext lib deps-notebook
	$(PYENV) $(PY) -m pytest -q -rs tests

# PyCUDA's own test files, unchanged, with `pycuda` imported as kiln (tests/pycuda_suite.py;
# PyCUDA's sources come from vendor/, which python3 bench/peers.py fetch fills). On the GPU
# machine: its tests need a GPU.
pycuda-suite: ext lib
	$(PYENV) $(PY) tests/pycuda_suite.py -q -rs $(PYCUDA_SUITE_ARGS)

# PyCUDA's example programs, each run as a script against kiln (tests/pycuda_examples.py).
pycuda-examples: ext lib
	$(PYENV) $(PY) tests/pycuda_examples.py $(PYCUDA_EXAMPLES_ARGS)

# The comparison with PyCUDA, CuPy, cuda.core and raw C (PyCUDA built from vendor/ first:
# python3 bench/peers.py fetch fills it where a registry is reachable), then the large
# pageable transfers, arrays that compute, and graphs with the extended launches. bench-detail: launch, cache and memory figures with their targets.
bench: ext lib
	$(PYENV) $(PY) bench/compare.py $(BENCH_ARGS)
	$(PYENV) $(PY) bench/transfer.py $(BENCH_ARGS)
	$(PYENV) $(PY) bench/arrays.py $(BENCH_ARGS)
	$(PYENV) $(PY) bench/graphs.py $(BENCH_ARGS)

bench-detail: ext lib
	$(PYENV) $(PY) bench/launch.py $(BENCH_ARGS)
	$(PYENV) $(PY) bench/cache.py $(BENCH_ARGS)
	$(PYENV) $(PY) bench/memory.py $(BENCH_ARGS)

# The CPU side of a launch, on any machine: kiln's call against the floor's on a CUDA driver
# that does no GPU work (bench/fakecuda/); BENCH_ARGS=--callgrind counts instructions instead
# of timing.
bench-cpu: ext
	$(PYENV) $(PY) bench/cpu.py $(BENCH_ARGS)

# Everything the GPU machine should run, in one go: build, the whole suite with nothing
# skipped, the benchmarks.
gpu-check:
	KILN_REQUIRE_GPU=1 $(MAKE) test
	$(MAKE) bench

# ---- Sanitizers ------------------------------------------------------------------------------
# `make sanitize` builds the engine, the C tests and the extension with AddressSanitizer and
# UndefinedBehaviorSanitizer into build/san-<compiler>/ (the normal build untouched), then runs the C
# tests and the pytest suite under them; the first report fails the run. SAN_CC picks the
# compiler: gcc (the default cc) and clang both work. GPU tests skip without a GPU, as in
# `make test`; on a GPU machine they run too (protect_shadow_gap=0 lets the CUDA driver map
# the memory ASan would otherwise guard).
# Python itself is not built with ASan, so its runtime is preloaded (LD_PRELOAD) into the
# interpreter for the extension to load. Leak detection stays on for the C tests and is off for
# the interpreter: CPython keeps interned strings, static types and its arenas alive at exit by
# design, and LeakSanitizer reports them all; kiln's own leaks are the C tests' to find.

SAN_CC    ?= $(CC)
SAN_BUILD  = $(BUILD)/san-$(notdir $(SAN_CC))
SAN_FLAGS  = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_PKG    = $(SAN_BUILD)/py
SAN_ASAN   = detect_leaks=1:abort_on_error=0:protect_shadow_gap=0:detect_stack_use_after_return=0
SAN_UBSAN  = print_stacktrace=1:halt_on_error=1
# gcc's runtime is libasan.so; clang's, libclang_rt.asan-<arch>.so, which also holds UBSan's
# (clang would also find gcc's libasan.so, whose UBSan part lives in another library).
SAN_RT     = $(shell if $(SAN_CC) --version 2>/dev/null | grep -q clang; \
                 then $(SAN_CC) -print-file-name=libclang_rt.asan-$$(uname -m).so; \
                 else $(SAN_CC) -print-file-name=libasan.so; fi)
# The C++ runtime is preloaded after it: ASan wraps __cxa_throw, and finds nothing to wrap when
# libstdc++ only arrives later with a C++ extension (matplotlib's, torch's), which then aborts on
# its first exception.
SAN_CXXRT  = libstdc++.so.6

sanitize: ext lib
	$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) CC=$(SAN_CC) CFLAGS='-O1 -g $(SAN_FLAGS)' \
	    $(SAN_BUILD)/test_engine
	CC=$(SAN_CC) CFLAGS='$(SAN_FLAGS)' LDFLAGS='$(SAN_FLAGS)' $(PY) setup.py --quiet \
	    build_ext --force --build-temp $(SAN_BUILD)/ext --build-lib $(SAN_BUILD)/lib
	@# The package's Python files with the sanitized extension beside them.
	rm -rf $(SAN_PKG) && mkdir -p $(SAN_PKG) && cp -R pymod/kiln $(SAN_PKG)/ && \
	    rm -f $(SAN_PKG)/kiln/_kiln*.so && cp $(SAN_BUILD)/lib/kiln/_kiln*.so $(SAN_PKG)/kiln/
	ASAN_OPTIONS=$(SAN_ASAN) UBSAN_OPTIONS=$(SAN_UBSAN) $(SAN_BUILD)/test_engine
	@test -f "$(SAN_RT)" || { echo "sanitize: no ASan runtime for $(SAN_CC)"; exit 1; }
	@# Reports go to files, not stderr: pytest captures a test's stderr, and a report that
	@# ends the interpreter would go with it. They are shown when the run fails.
	rm -f $(SAN_BUILD)/report.*
	LD_PRELOAD="$(SAN_RT) $(SAN_CXXRT)" ASAN_OPTIONS=$(SAN_ASAN):detect_leaks=0:log_path=$(CURDIR)/$(SAN_BUILD)/report \
	    UBSAN_OPTIONS=$(SAN_UBSAN):log_path=$(CURDIR)/$(SAN_BUILD)/report \
	    PYTHONPATH=$(CURDIR)/$(SAN_PKG) $(PY) -m pytest -q -rs -p no:cacheprovider tests || \
	    { for f in $(SAN_BUILD)/report.*; do [ -f "$$f" ] && echo "== $$f" && cat "$$f"; done; exit 1; }

# ---- valgrind --------------------------------------------------------------------------------
# `make valgrind` runs the C tests under memcheck. valgrind follows the runner's fork, so each
# test's own process is checked, and an invalid read or write, a use of uninitialised memory or a
# definite leak fails that test (exit 99). Errors inside NVRTC itself are left out
# (tests/c/valgrind.supp). GPU tests skip without a GPU, as in `make test`. Slow: a test that
# compiles runs NVRTC under memcheck (minutes for some), and tests that time processes against
# each other may fail on timing alone; their logs say which.

VALGRIND_FLAGS = --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite \
                 --error-exitcode=99 --suppressions=tests/c/valgrind.supp --quiet

valgrind: $(BUILD)/test_engine $(BUILD)/kiln-nvrtc
	valgrind $(VALGRIND_FLAGS) $(BUILD)/test_engine

# ---- Fuzzing ---------------------------------------------------------------------------------
# libFuzzer over the readers of bytes kiln did not write in this process: cache entries found
# on disk (kiln__entry_decode), sources and headers scanned for #include
# (kiln__headers_find_includes), PTX given as an image or compiled (kiln__ptx_parse,
# kiln__ptx_globals, kiln_module_from_image) and the mangled names in it (kiln__demangle).
# Every target copies its input into a buffer of exactly its size, with no NUL after it.
# `make fuzz` builds the targets, writes the seed corpora and runs each target for
# FUZZ_SECONDS; it fails when one crashes, leaving the input under build/fuzz/. CI runs it
# for 30 s a target.
# The corpora grow there between runs (build/ is git-ignored).

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR      = $(BUILD)/fuzz
FUZZ_TARGETS  = entry includes ptx demangle dialect
FUZZ_OBJS     = $(KILN_ENGINE_SOURCES:%.c=$(FUZZ_DIR)/%.o)
# UBSan does not recover, so undefined behaviour stops the run like a crash does and libFuzzer
# keeps the input. The engine's own objects get -fsanitize=fuzzer-no-link: coverage feedback
# and the sanitizers' checks without a second main.
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=undefined
# engine/src by -iquote, not -I: the targets need its "entry.h", but as -I it would also answer
# the engine's <nvrtc.h> with its own nvrtc.h instead of the toolkit's.
FUZZ_CFLAGS   = -g -O1 -std=c11 -D_GNU_SOURCE $(KILN_WARNINGS) -Iengine/include \
                -iquote engine/src -isystem $(CUDA_HOME)/include

# libFuzzer comes with clang, not with gcc; install it when missing, as deps does for NumPy.
fuzz-cc:
	@command -v $(FUZZ_CC) >/dev/null || { \
	    echo "fuzz: $(FUZZ_CC) not found; trying apt-get install -y clang"; \
	    apt-get install -y clang; }
	@command -v $(FUZZ_CC) >/dev/null || { \
	    echo "fuzz: needs $(FUZZ_CC) with libFuzzer (apt-get install clang)"; exit 1; }

# Order-only on fuzz-cc: checked every run, yet never a reason to rebuild.
$(FUZZ_DIR)/%.o: %.c $(HEADERS) | fuzz-cc
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS) $(HEADERS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer $< $(FUZZ_OBJS) $(LDLIBS) -o $@

$(FUZZ_DIR)/seed: tests/fuzz/seed.c $(FUZZ_OBJS) $(HEADERS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) $< $(FUZZ_OBJS) $(LDLIBS) -o $@

# Every target runs even when one before it crashed, so one run reports them all; the summary
# takes the executions from libFuzzer's last line ("Done N runs in S second(s)"), or after a
# crash, which has no such line, from the statistics -print_final_stats=1 adds. A hang of 10 s
# on one input counts as a crash too.
fuzz: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%) $(FUZZ_DIR)/seed
	@mkdir -p $(FUZZ_TARGETS:%=$(FUZZ_DIR)/corpus-%)
	$(FUZZ_DIR)/seed $(FUZZ_TARGETS:%=$(FUZZ_DIR)/corpus-%)
	@rm -f $(FUZZ_DIR)/summary; failed=0; \
	for t in $(FUZZ_TARGETS); do \
	    log=$(FUZZ_DIR)/$$t.log; \
	    echo "fuzz_$$t: $(FUZZ_SECONDS) s on $(FUZZ_DIR)/corpus-$$t (log: $$log)"; \
	    if $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	        -dict=tests/fuzz/$$t.dict -artifact_prefix=$(FUZZ_DIR)/$$t- -print_final_stats=1 \
	        $(FUZZ_DIR)/corpus-$$t >$$log 2>&1; then \
	        crashes=0; input=; \
	    else \
	        crashes=1; failed=1; tail -n 60 $$log; \
	        input=$$(sed -n 's/.*Test unit written to \(.*\)/ (input: \1)/p' $$log | tail -n 1); \
	    fi; \
	    runs=$$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' $$log | tail -n 1); \
	    [ -n "$$runs" ] || \
	        runs=$$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\)/\1/p' $$log); \
	    echo "fuzz_$$t: $${runs:-?} executions, $$crashes crashes$$input" >>$(FUZZ_DIR)/summary; \
	done; \
	cat $(FUZZ_DIR)/summary; exit $$failed

# ---- Lint ------------------------------------------------------------------------------------
# `make lint` runs its three parts and fails at the end when one did:
#   lint-build   the engine, the C tests and the extension built with clang, the warning flags
#                and -Werror, into build/clang/ (the gcc build and the in-place .so untouched)
#   lint-layers  tools/layers.py: no include cycle in engine/src or pymod/_kiln, pymod/ sees the
#                engine through kiln.h alone, the engine includes nothing of Python
#   lint-format  tools/format.py: the C files against .clang-format, with the clang-format
#                pinned here (from PyPI, installed like NumPy: only when missing or another
#                version); `make format` rewrites the files that differ.

CLANG_FORMAT_VERSION = 22.1.8
LINT_CC    ?= clang
LINT_BUILD  = $(BUILD)/clang
LINT_EXT    = $(LINT_BUILD)/lib/kiln/$(notdir $(EXT))

lint:
	@failed=; for part in lint-build lint-layers lint-format; do \
	    $(MAKE) --no-print-directory $$part || failed="$$failed $$part"; \
	done; \
	if [ -n "$$failed" ]; then echo "lint: failed:$$failed"; exit 1; fi; echo "lint: all passed"

lint-build:
	$(MAKE) --no-print-directory BUILD=$(LINT_BUILD) CC=$(LINT_CC) CFLAGS='-O2 -g -Werror' \
	    $(LINT_BUILD)/libkiln.a $(LINT_BUILD)/libkiln.so $(LINT_BUILD)/test_engine
	$(MAKE) --no-print-directory $(LINT_EXT)

$(LINT_EXT): $(KILN_ENGINE_SOURCES) $(HEADERS) $(wildcard pymod/_kiln/*.c pymod/_kiln/*.h) setup.py | deps
	CC=$(LINT_CC) CFLAGS='-Werror' $(PY) setup.py --quiet build_ext --force \
	    --build-temp $(LINT_BUILD)/ext --build-lib $(LINT_BUILD)/lib

lint-layers: deps
	$(PY) tools/layers.py

lint-tools: deps
	@$(PY) -c 'import importlib.metadata as m, sys; \
	    sys.exit(m.version("clang-format") != "$(CLANG_FORMAT_VERSION)")' 2>/dev/null || \
	    $(PY) -m pip install --quiet clang-format==$(CLANG_FORMAT_VERSION)

lint-format: lint-tools
	$(PY) tools/format.py check $(CLANG_FORMAT_VERSION)

format: lint-tools
	$(PY) tools/format.py fix $(CLANG_FORMAT_VERSION)

clean:
	rm -rf $(BUILD) pymod/kiln/_kiln*.so $(KILN_VENV)
