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

.PHONY: all lib ext deps demo test test-c test-py bench gpu-check clean

all: lib ext

lib: $(BUILD)/libkiln.a $(BUILD)/libkiln.so

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libkiln.a: $(OBJS)
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

test-py: ext
	$(PYENV) $(PYTHON) -m pytest -q tests

bench: ext
	$(PYENV) $(PYTHON) bench/launch.py $(BENCH_ARGS)

# Everything the GPU machine should run, in one go: build, the whole suite with nothing
# skipped, the benchmarks.
gpu-check:
	KILN_REQUIRE_GPU=1 $(MAKE) test
	$(MAKE) bench

clean:
	rm -rf $(BUILD) pymod/kiln/_kiln*.so
