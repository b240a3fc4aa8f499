# Kiln's developer entry points. `make demo` and `make test` work on a fresh machine: they install
# what is missing (Debian packages, the .venv) and build first.
#
#   make build      configure + incremental build (C++ library, Python module in place, tests)
#   make test       build, C++ tests (ctest), Python tests (pytest), the sanitizer jobs
#   make demo       build and run examples/demo.py and the custom-op, custom-backend and
#                   custom-pass examples
#   make bench      Google Benchmark programs + bench/compare.py + bench/jit_cpu_bench.py

PYTHON      ?= python3
VENV        := .venv
VENV_PY     := $(VENV)/bin/python
BUILD       := build
ASAN_BUILD  := build-asan
TSAN_BUILD  := build-tsan
JOBS        ?= $(shell nproc)
PY_DEPS     := numpy pytest nanobind scikit-build-core
# What examples/train_mlp.py and its test need (the digits data set ships with scikit-learn).
# A stamp of their own installs them into a .venv made before they were listed.
EXAMPLE_DEPS := scikit-learn tqdm matplotlib
CMAKE_FLAGS := -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_INPLACE=ON \
               -DPython_EXECUTABLE=$(abspath $(VENV_PY))

.PHONY: all deps build test test-cpp test-python test-asan test-tsan demo bench clean

all: build

$(VENV)/.deps-stamp:
	bash scripts/install-deps.sh
	test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install --quiet --upgrade pip
	$(VENV_PY) -m pip install --quiet $(PY_DEPS)
	touch $@

$(VENV)/.example-deps-stamp: $(VENV)/.deps-stamp
	$(VENV_PY) -m pip install --quiet $(EXAMPLE_DEPS)
	touch $@

deps: $(VENV)/.deps-stamp $(VENV)/.example-deps-stamp

$(BUILD)/build.ninja: $(VENV)/.deps-stamp
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)
	@# Let the venv's python import kiln from the source tree.
	@echo "$(abspath python)" > $$($(VENV_PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/kiln-dev.pth

test-cpp: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-python: build $(VENV)/.example-deps-stamp
	$(VENV_PY) -m pytest -q tests/python

# The sanitizer builds compile with -O1 and line tables only (-g1): enough for the sanitizers'
# reports, and under half the compile time of -O2 -g (a kernel file: 17 s against 46 s).
SANITIZER_FLAGS := -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                   -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
                   -DKILN_BUILD_PYTHON=OFF -DKILN_BUILD_BENCH=OFF

# AddressSanitizer + UndefinedBehaviorSanitizer over the C++ suite (no Python module: the
# interpreter is not instrumented).
$(ASAN_BUILD)/build.ninja: $(VENV)/.deps-stamp
	cmake -S . -B $(ASAN_BUILD) $(SANITIZER_FLAGS) -DKILN_SANITIZE=address,undefined

test-asan: $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    ctest --output-on-failure -j $(JOBS) -E cmake_consumer

# ThreadSanitizer over the runtime's tests (tests/cpp/runtime: the pipeline, its sync points and
# the caching allocator), custom ops' runners in every pipeline mode, ops and backends removed
# while other threads use them, and the distributed layer
# (the rendezvous stores' server and client threads, each group's collective thread). OpenMP (libgomp) is not
# instrumented, so TSan cannot see its barriers and would report the chunks of one parallel loop
# as racing: the job runs one intra-op thread (OMP_NUM_THREADS, which kiln::get_num_threads and
# oneDNN follow). die_after_fork=0: the fork
# tests start the pipeline's workers again in the child, which TSan refuses by default once the
# parent has had threads. tests/tsan.supp: races TSan reports inside uninstrumented libraries (each
# entry says why it is not one).
# TSAN_TESTS: the test files that hold the tests TSAN_FILTER selects; the job builds only them.
TSAN_TESTS  := cpp/runtime/*_test.cc;cpp/distributed/*_test.cc;cpp/extension/op_runner_test.cc;$\
               cpp/jit/backend_lifetime_test.cc
TSAN_FILTER := Pipeline|CachingAllocator|OpRunnerInMode|OpRemoval|BackendLifetime|Distributed|Store
$(TSAN_BUILD)/build.ninja: $(VENV)/.deps-stamp
	cmake -S . -B $(TSAN_BUILD) $(SANITIZER_FLAGS) -DKILN_SANITIZE=thread \
	    "-DKILN_TEST_SOURCE_GLOBS=$(TSAN_TESTS)"

test-tsan: $(TSAN_BUILD)/build.ninja
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target kiln_tests
	cd $(TSAN_BUILD) && OMP_NUM_THREADS=1 \
	    TSAN_OPTIONS="halt_on_error=1 die_after_fork=0 suppressions=$(CURDIR)/tests/tsan.supp" \
	    ctest --output-on-failure -j $(JOBS) -R '$(TSAN_FILTER)'

test: test-cpp test-python test-asan test-tsan

demo: build $(VENV)/.example-deps-stamp
	$(VENV_PY) examples/demo.py
	$(VENV_PY) examples/train_mlp.py --plot $(BUILD)/mlp_loss.png
	$(VENV_PY) -m kiln.distributed.run --nproc 2 examples/train_mlp_distributed.py
	$(VENV_PY) examples/custom_op/run.py
	$(VENV_PY) examples/custom_backend/run.py
	$(VENV_PY) examples/custom_backend/python_backend.py
	$(VENV_PY) examples/custom_pass/run.py

bench: build
	$(VENV_PY) bench/compare.py
	$(VENV_PY) bench/jit_cpu_bench.py

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
