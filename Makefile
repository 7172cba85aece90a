# kiln: `make demo` runs the seed's multiply_them end to end; `make test` runs every test.
# Both set up what they need on a fresh machine (NumPy and pytest come from the registry when
# they are missing; on a machine without network they must already be installed).

PYTHON    ?= python3
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
PYENV   = PYTHONPATH=$(CURDIR)/pymod$${PYTHONPATH:+:$$PYTHONPATH}

.PHONY: all lib ext deps demo test test-c test-py bench bench-detail gpu-check fuzz fuzz-cc clean \
        lint lint-build lint-layers lint-format lint-tools format

all: lib ext

lib: $(BUILD)/libkiln.a $(BUILD)/libkiln.so

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libkiln.a: $(OBJS)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/libkiln.so: $(OBJS)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/test_engine: $(CTESTS) $(wildcard tests/c/*.h) $(BUILD)/libkiln.a
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -DKILN_SOURCE_DIR='"$(CURDIR)"' $(CTESTS) \
	    $(BUILD)/libkiln.a $(LDLIBS) -o $@

# NumPy and pytest from the registry when missing (the GPU machine has both and no network).
deps:
	@$(PYTHON) -c 'import numpy, pytest, setuptools' 2>/dev/null || \
	    $(PYTHON) -m pip install --quiet numpy pytest setuptools

ext: $(EXT)

$(EXT): $(KILN_ENGINE_SOURCES) $(HEADERS) $(wildcard pymod/_kiln/*.c pymod/_kiln/*.h) setup.py | deps
	$(PYTHON) setup.py --quiet build_ext --inplace --build-temp $(BUILD)/ext

demo: ext
	$(PYENV) $(PYTHON) -m kiln demo

test: test-c test-py

test-c: $(BUILD)/test_engine
	$(BUILD)/test_engine

test-py: ext lib
	$(PYENV) $(PYTHON) -m pytest -q -rs tests

# The comparison with PyCUDA, CuPy, cuda.core and raw C (PyCUDA built from vendor/ first:
# python3 bench/peers.py fetch fills it where a registry is reachable), then the large
# pageable transfers, arrays that compute, and graphs with the extended launches. bench-detail: launch, cache and memory figures with their targets.
bench: ext lib
	$(PYENV) $(PYTHON) bench/compare.py $(BENCH_ARGS)
	$(PYENV) $(PYTHON) bench/transfer.py $(BENCH_ARGS)
	$(PYENV) $(PYTHON) bench/arrays.py $(BENCH_ARGS)
	$(PYENV) $(PYTHON) bench/graphs.py $(BENCH_ARGS)

bench-detail: ext lib
	$(PYENV) $(PYTHON) bench/launch.py $(BENCH_ARGS)
	$(PYENV) $(PYTHON) bench/cache.py $(BENCH_ARGS)
	$(PYENV) $(PYTHON) bench/memory.py $(BENCH_ARGS)

# Everything the GPU machine should run, in one go: build, the whole suite with nothing
# skipped, the benchmarks.
gpu-check:
	KILN_REQUIRE_GPU=1 $(MAKE) test
	$(MAKE) bench

# ---- Fuzzing ---------------------------------------------------------------------------------
# libFuzzer over the two parsers that read bytes kiln did not write in this process: cache
# entries found on disk (kiln__entry_decode) and sources and headers scanned for #include
# (kiln__headers_find_includes). `make fuzz` builds the targets, writes the seed corpora and
# runs each target for FUZZ_SECONDS; it fails when one crashes, leaving the input under
# build/fuzz/.
# The corpora grow there between runs (build/ is git-ignored).

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR      = $(BUILD)/fuzz
FUZZ_TARGETS  = entry includes
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
	$(FUZZ_DIR)/seed $(FUZZ_DIR)/corpus-entry $(FUZZ_DIR)/corpus-includes
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
	CC=$(LINT_CC) CFLAGS='-Werror' $(PYTHON) setup.py --quiet build_ext --force \
	    --build-temp $(LINT_BUILD)/ext --build-lib $(LINT_BUILD)/lib

lint-layers:
	$(PYTHON) tools/layers.py

lint-tools:
	@$(PYTHON) -c 'import importlib.metadata as m, sys; \
	    sys.exit(m.version("clang-format") != "$(CLANG_FORMAT_VERSION)")' 2>/dev/null || \
	    $(PYTHON) -m pip install --quiet clang-format==$(CLANG_FORMAT_VERSION)

lint-format: lint-tools
	$(PYTHON) tools/format.py check $(CLANG_FORMAT_VERSION)

format: lint-tools
	$(PYTHON) tools/format.py fix $(CLANG_FORMAT_VERSION)

clean:
	rm -rf $(BUILD) pymod/kiln/_kiln*.so
