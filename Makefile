# corral's entry points. Every target installs what it needs first (scripts/bootstrap.sh is
# idempotent and takes well under a second when everything is present): `make run` only what
# running needs (bootstrap.sh run), the others what testing needs too (bootstrap.sh test).
#
#   make run     set up, build the binary and the dashboard (no tests or benchmarks), and run
#                corral's main job: `corral dev`, a one-machine cluster (dashboard at its URL)
#   make sim-demo  the simulator demo: every placement policy on the openb trace
#   make test    set up, build, run all tests: CLI, end-to-end, the Python client, hostile
#                clients, the dashboard's browser tests, distributed and elastic training, the
#                fault harness's short run (on the Release binaries, build-test), then the unit
#                tests once, in the ASan+UBSan tree, on SQLite and PostgreSQL (test-asan)
#   make test-unit  the unit tests in the Release tree (SQLite + PostgreSQL); not part of
#                `make test` since session 44, which runs them in the sanitizer tree instead
#   make test-security  the hostile-client tests (tests/security/, docs/security.md)
#   make test-python  the Python client's end-to-end tests (clients/python/, docs/python.md)
#   make test-repeat  the end-to-end, security and distributed tests N times in a row (N=5 by
#                default), stopping at the first failure
#   make build   Release build in build/ (binaries: build/corral, build/corral-daemon and
#                build/corral-supervise, the tests and the benchmarks)
#   make build-test  the same build/ (configured as `make build`), only what `make test`'s Release
#                steps run, the three binaries, and the benchmarks (compiled, not run)
#   make web     the dashboard: npm ci (when web/node_modules is missing or older than the lock
#                file), then esbuild into web/dist
#   make test-web  the dashboard's end-to-end test: headless Chromium against a real corral dev
#   make bench-web the heatmap's render time with 1,000 fake nodes, the jobs page's first paint at
#                10,000 jobs (docs/benchmarks.md)
#   make bench   build, run the benchmark binaries in build/bench/, then bench/macro.sh
#   make faults  the fault harness's full run (tests/faults/, docs/reliability.md; <= 30 min):
#                servers, agents and PostgreSQL killed, agents cut off, the disk filled, under
#                load; fails on a lost job or two runs of one task at once
#   make test-faults  its short run (about 3.5 minutes; part of `make test`)
#   make fuzz    build the libFuzzer targets (fuzz/, clang) in build-fuzz/ and run each for
#                FUZZ_SECONDS on its seed corpus, merging what reaches new code into
#                fuzz/corpus/ (docs/security.md, "Fuzzing"); fails on any crash
#   make fuzz-ci the same, 10 s per target, JOBS targets at a time, the corpus read only (CI)
#   make lint    clang-format check (fails on any difference), the unity batches' file-local name
#                check (fails on a name two files of one batch define), clang-tidy (advisory)
#   make format  apply clang-format to every C++ file in place
#   make clean   remove the build folders and the demo output
#
# Variables: JOBS (parallel jobs, default: all cores), TRACES (public traces folder, default
# ../shared/traces), BENCH_ARGS (extra flags for the benchmark binaries), CORRAL_TIMINGS (a file
# to which every timed step appends a line; .ci/run prints them as its summary), N (runs of
# test-repeat, default 5), FUZZ_SECONDS (per target in `make fuzz`, default 120), FAULTS
# (multiplies every fault count of `make faults`, default 1), FAULT_KINDS (comma-separated:
# only these fault kinds in `make faults` and `make test-faults`; default all of the run's).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
# Targets run one after another; each build inside uses $(JOBS) cores itself.
.NOTPARALLEL:
.DEFAULT_GOAL := build

JOBS ?= $(shell nproc)
TRACES ?= ../shared/traces
BENCH_ARGS ?=
N ?= 5
FUZZ_SECONDS ?= 120
FAULTS ?= 1
FAULT_KINDS ?=
# What the end-to-end targets build first (the Release binaries alone); test-repeat builds once
# and then empties it.
TEST_BUILD := build-test
DEMO_OUT := .corral/sim-demo
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# Release build: benchmarks are compiled too, so that `make test` notices when they stop compiling.
# `make run` configures the same build/ without tests and benchmarks (it builds only the binary,
# and its bootstrap installs neither GoogleTest nor Google Benchmark); switching between the two
# re-runs CMake but recompiles nothing, as no compile flag depends on these options.
RELEASE_FLAGS := -DCMAKE_BUILD_TYPE=Release -DCORRAL_SANITIZE=OFF -DCORRAL_TESTS=ON -DCORRAL_BENCH=ON
RUN_FLAGS := -DCMAKE_BUILD_TYPE=Release -DCORRAL_SANITIZE=OFF -DCORRAL_TESTS=OFF -DCORRAL_BENCH=OFF
ASAN_FLAGS := -DCMAKE_BUILD_TYPE=Debug -DCORRAL_SANITIZE=ON -DCORRAL_TESTS=ON -DCORRAL_BENCH=OFF
# The fuzz targets and only the libraries they fuzz, by clang (CMakeLists.txt, CORRAL_FUZZ).
FUZZ_FLAGS := -DCMAKE_CXX_COMPILER=clang++-14 -DCORRAL_FUZZ=ON

# cmake --build runs its own make: keep ours out of its environment (no jobserver to share,
# no "Entering directory" noise).
CMAKE_BUILD := env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build

CXX_DIRS := src apps tests bench fuzz
FORMAT_FILES = $(shell find $(CXX_DIRS) -type f \( -name '*.h' -o -name '*.cc' \) 2>/dev/null | sort)
TIDY_FILES = $(shell find src -type f -name '*.cc' ! -name '*_test.cc' | sort)

# $(call timed,NAME,COMMAND): runs COMMAND (in a subshell, with errexit), prints how long it
# took, appends "NAME<TAB>SECONDS<TAB>ok|FAILED" to $CORRAL_TIMINGS when set, and fails when
# COMMAND failed. COMMAND must not contain a literal comma; put such text in a variable.
define timed
printf '\n==> %s\n' "$(1)"; t0=$$(date +%s%N); \
  set +e; (set -e; $(2)); st=$$?; set -e; \
  ms=$$(( ($$(date +%s%N) - t0) / 1000000 )); res=ok; tag=; [ $$st -eq 0 ] || { res=FAILED; tag=" FAILED"; }; \
  printf '==> %s: %d.%03d s%s\n' "$(1)" $$((ms / 1000)) $$((ms % 1000)) "$$tag"; \
  if [ -n "$${CORRAL_TIMINGS:-}" ]; then \
    printf '%s\t%d.%d\t%s\n' "$(1)" $$((ms / 1000)) $$((ms % 1000 / 100)) $$res >> "$$CORRAL_TIMINGS"; fi; \
  test $$st -eq 0
endef

# $(call configure,DIR,FLAGS): configures DIR, recreating it when it was configured for another
# source tree (a copied checkout) where CMake would refuse to reuse it.
define configure
if [ -f $(1)/CMakeCache.txt ] && ! grep -qxF 'CMAKE_HOME_DIRECTORY:INTERNAL=$(CURDIR)' $(1)/CMakeCache.txt; then \
  echo "$(1)/ was configured for another source tree; recreating it"; rm -rf $(1); fi; \
cmake -S . -B $(1) $(2) >/dev/null
endef

.PHONY: setup setup-run configure build build-test build-corral web test test-unit test-cli test-e2e test-security test-web test-distributed test-ha test-faults test-asan test-python test-repeat faults run sim-demo bench bench-web screenshots fuzz fuzz-build fuzz-ci lint format format-check tidy clean

# What building, testing and linting need (bootstrap.sh test); setup-run: only what `make run`
# needs (bootstrap.sh run).
setup:
	@$(call timed,setup,bash scripts/bootstrap.sh test)

setup-run:
	@$(call timed,setup,bash scripts/bootstrap.sh run)

configure: setup
	@$(call configure,build,$(RELEASE_FLAGS))

build: configure
	@$(call timed,build (Release),$(CMAKE_BUILD) build -j$(JOBS))

# The Release binaries that the CLI, end-to-end, Python, security, HA, dashboard, distributed and
# fault steps run, and the benchmarks (not run: compiled as the check that they still compile,
# about 30 s of CPU), in the tree `make build` uses (same flags: nothing recompiles when switching),
# but not its test binaries: `make test` runs the unit tests in the sanitizer tree (test-asan), so
# compiling them at -O3 too cost CPU for tests it no longer runs (docs/decisions.md, "CI's builds
# (session 44)").
build-test: configure
	@$(call timed,build (Release; binaries and benchmarks),$(CMAKE_BUILD) build -j$(JOBS) --target corral corral-daemon corral-supervise benchmarks)

# The binaries alone (what `make run` needs): build/corral, the client, build/corral-daemon,
# which `corral server|agent|dev|launch|sim` runs, and build/corral-supervise, the agent's task
# supervisor; no test or benchmark targets are configured or built.
build-corral: setup-run
	@$(call configure,build,$(RUN_FLAGS))
	@$(call timed,build (Release; corral only),$(CMAKE_BUILD) build -j$(JOBS) --target corral corral-daemon corral-supervise)

# The dashboard (web/, docs/dashboard.md). npm ci only when web/node_modules is missing or older
# than package-lock.json (npm ci writes node_modules/.package-lock.json); the build itself takes
# under a second.
WEB_BUILD = cd web && \
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
    npm ci --no-audit --no-fund --loglevel=error; fi; \
  node build.mjs
web: setup-run
	@$(call timed,dashboard build (web/),$(WEB_BUILD))

# In this order (.NOTPARALLEL): the Release binaries' tests first, the slow sanitizer build and
# the unit tests (their only run in `make test`) last.
test: test-cli test-e2e test-python test-security test-ha test-web test-distributed test-faults test-asan
	@echo; echo "make test: all passed"

# The unit tests in the Release tree (for developers; `make test` runs them in the sanitizer tree),
# under a throwaway PostgreSQL (scripts/with_postgres.sh), so that the store suite runs against
# both SQLite and PostgreSQL.
test-unit: build
	@$(call timed,unit tests (Release; SQLite and PostgreSQL),bash scripts/with_postgres.sh ctest --test-dir build --output-on-failure -j$(JOBS))

# Real processes on loopback: a server, agents with fake GPUs, the CLI, SIGKILLs; then GPU
# monitoring with a real Prometheus scraping the server. One line per test file (test-repeat runs
# them all too).
test-e2e: $(TEST_BUILD)
	@$(call timed,end-to-end tests,python3 tests/e2e_test.py build/corral)
	@$(call timed,end-to-end test without corral-supervise (the agent's own binary supervises),bash tests/without_supervisor_test.sh build/corral)
	@$(call timed,launch and exit end-to-end tests,python3 tests/e2e_launch_test.py build/corral)
	@$(call timed,monitoring end-to-end tests,python3 tests/e2e_monitoring_test.py build/corral)
	@$(call timed,isolation end-to-end tests,python3 tests/isolation_test.py build/corral)
	@$(call timed,agent protocol end-to-end tests,python3 tests/protocol_test.py build/corral)
	@$(call timed,back-pressure end-to-end tests,python3 tests/backpressure_test.py build/corral)
	@$(call timed,fencing fault tests (server frozen; agent cut off: root),python3 tests/faults/fence_test.py build/corral)
	@$(call timed,several-server clients end-to-end tests,python3 tests/ha/server_list_test.py build/corral)

# The Python client (clients/python/, docs/python.md) against a real corral dev: installed offline
# into a fresh venv, then from PYTHONPATH (bootstrap.sh test installs python3-venv,
# python3-setuptools, python3-wheel and python3-cloudpickle).
test-python: $(TEST_BUILD)
	@$(call timed,Python client end-to-end tests,python3 tests/python_client_test.py build/corral)

# Two agents in two network namespaces run real PyTorch DDP jobs (root; skips otherwise), then
# an elastic DDP job that grows to both nodes and shrinks back (docs/elastic.md).
test-distributed: $(TEST_BUILD)
	@$(call timed,distributed training tests,python3 tests/distributed_test.py build/corral)
	@$(call timed,elastic DDP training test,python3 tests/elastic_ddp_test.py build/corral)

# The fault harness (tests/faults/, docs/reliability.md): real servers and agents (in network
# namespaces as root) under a steady load while faults are injected; then no acknowledged job may
# be lost and no two runs of one task may overlap. The short run has only the faults whose
# invariants main keeps today; the full run has every kind (long partitions too).
test-faults: $(TEST_BUILD)
	@$(call timed,fault harness (short run),python3 tests/faults/fault_run.py build/corral --plan short --kinds "$(FAULT_KINDS)")

faults: build
	@$(call timed,fault harness (full run),python3 tests/faults/fault_run.py build/corral --plan full --scale $(FAULTS) --kinds "$(FAULT_KINDS)")

# Flakiness check: test-e2e, test-python, test-security and test-distributed N times in a row
# (N=5: `make test-repeat N=10`),
# on one build, stopping at the first failing run and naming it.
test-repeat: build-test
	@for i in $$(seq 1 $(N)); do \
	  printf '\n######## test-repeat: run %d of %d\n' $$i $(N); \
	  if ! $(MAKE) --no-print-directory test-e2e test-python test-security test-distributed TEST_BUILD=; then \
	    printf '\ntest-repeat: run %d of %d FAILED (runs 1 to %d passed)\n' $$i $(N) $$((i - 1)); exit 1; fi; \
	done; printf '\ntest-repeat: all %d runs passed\n' $(N)

# Headless Chromium (playwright-core) against a real corral dev; screenshots of every page in
# build/web-artifacts/.
test-web: $(TEST_BUILD) web
	@$(call timed,dashboard unit tests,node --test web/test/*.test.mjs)
	@$(call timed,dashboard end-to-end tests,node tests/web/dashboard_e2e.mjs build/corral build/web-artifacts)

# Hostile clients (docs/security.md): every attack tests/security/ knows, against real servers
# (also run by test-repeat).
test-security: $(TEST_BUILD)
	@for t in tests/security/*_test.py; do \
	  $(call timed,security: $$(basename $$t .py),python3 $$t build/corral) || exit 1; done

# Several servers on one PostgreSQL (docs/control-plane.md): SIGKILL and SIGSTOP of the leader,
# a follower forwarding to the leader, two real servers and an agent under a throwaway PostgreSQL; skipped when none can start here.
test-ha: $(TEST_BUILD)
	@if bash scripts/with_postgres.sh true >/dev/null 2>&1; then \
	  $(call timed,HA failover tests (PostgreSQL),bash scripts/with_postgres.sh python3 tests/ha/failover_test.py build/corral); \
	  $(call timed,HA forwarding tests (PostgreSQL),bash scripts/with_postgres.sh python3 tests/ha/forward_test.py build/corral); \
	else echo; echo "==> HA failover tests: PostgreSQL cannot start here (scripts/with_postgres.sh true fails); skipped"; fi

test-cli: $(TEST_BUILD)
	@if [ -f tests/cli_test.sh ]; then \
	  $(call timed,CLI tests,bash tests/cli_test.sh build/corral); \
	else echo; echo "==> CLI tests: tests/cli_test.sh does not exist yet; skipped"; fi

# Builds only what the unit tests run (CMake's `unit-tests`: the test binaries, corral-daemon and
# corral-supervise), not the client binary, which no unit test starts. The tests run under a
# throwaway PostgreSQL (scripts/with_postgres.sh), so that the store suite runs against both
# SQLite and PostgreSQL: this is `make test`'s only run of the unit tests.
test-asan: setup
	@$(call configure,build-asan,$(ASAN_FLAGS))
	@$(call timed,build (ASan+UBSan),$(ASAN_ENV) $(CMAKE_BUILD) build-asan -j$(JOBS) --target unit-tests)
	@$(call timed,unit tests (ASan+UBSan; SQLite and PostgreSQL),$(ASAN_ENV) bash scripts/with_postgres.sh ctest --test-dir build-asan --output-on-failure -j$(JOBS))

# The main job: a one-machine cluster (server + agent, SQLite, fake GPUs when the machine has
# none) in .corral/dev, until Ctrl-C. It prints the URL, the admin token and example commands.
run: build-corral web
	@mkdir -p .corral
	build/corral dev --data-dir .corral/dev

# The simulator demo: every placement policy fills a cluster with tasks until it is full, on the
# public openb trace when it is here, else on a seeded synthetic workload.
DEMO_GEN_NODES := gen:64x8xA100-80GB,64x4xV100
sim-demo: build
	@rm -rf $(DEMO_OUT); mkdir -p .corral
	@if [ -f $(TRACES)/openb_node_list_gpu_node.csv ]; then \
	  echo "==> corral sim fill on the openb trace ($(TRACES))"; \
	  set -x; \
	  build/corral sim fill --nodes $(TRACES)/openb_node_list_gpu_node.csv \
	    --pods $(TRACES)/openb_pod_list_default.csv --policy all --seeds 42-51 --out $(DEMO_OUT); \
	else \
	  echo "==> $(TRACES) has no openb trace: corral sim fill on a synthetic workload"; \
	  set -x; \
	  build/corral sim gen --jobs 5000 --seed 1 --out .corral/synthetic.jsonl; \
	  build/corral sim fill --nodes $(DEMO_GEN_NODES) --pods .corral/synthetic.jsonl \
	    --policy all --seeds 42-46 --out $(DEMO_OUT); \
	fi
	@echo; echo "Per-step CSVs (one per policy and seed): $(DEMO_OUT)/fill_<policy>_<seed>.csv"; \
	  echo "Plot of unallocated GPUs against load:    $(DEMO_OUT)/fill_unallocated.svg"

# The dashboard's heatmap render time: 1,000 fake nodes x 8 GPUs, 7 runs.
bench-web: build-corral web
	@$(call timed,bench/web_render.mjs,node bench/web_render.mjs 1000 8 7)
	@$(call timed,bench/web_jobs.mjs,node bench/web_jobs.mjs build/corral 10000 7)

# Screenshots of every dashboard page at 1,000 jobs and 50 nodes, into docs/screenshots/.
screenshots: build web
	@$(call timed,dashboard screenshots,node tests/web/dashboard_screenshots.mjs build/corral docs/screenshots)

# Micro benchmarks (Google Benchmark binaries in build/bench/), then the end-to-end simulator
# benchmarks of bench/macro.sh when it exists.
bench: build
	@found=0; \
	for b in build/bench/*; do \
	  [ -f "$$b" ] && [ -x "$$b" ] || continue; found=1; \
	  $(call timed,$$(basename $$b),"$$b" $(BENCH_ARGS)); \
	done; \
	[ $$found -eq 1 ] || echo "No benchmark binaries in build/bench/ yet."
	@if [ -f bench/macro.sh ]; then \
	  $(call timed,bench/macro.sh,CORRAL_SHARED_TRACES=$(TRACES) bash bench/macro.sh build/corral); fi

# libFuzzer targets (fuzz/, docs/security.md "Fuzzing"): a third build folder, by clang, that
# compiles only the libraries being fuzzed; then scripts/fuzz.sh runs the targets one after
# another.
fuzz-build: setup
	@$(call configure,build-fuzz,$(FUZZ_FLAGS))
	@$(call timed,build (libFuzzer targets),$(CMAKE_BUILD) build-fuzz -j$(JOBS))

fuzz: fuzz-build
	@$(call timed,fuzzing ($(FUZZ_SECONDS) s per target),bash scripts/fuzz.sh $(FUZZ_SECONDS) --merge)

# Two targets at a time on CI's two cores (JOBS): the ten 10 s runs take about 50 s, not 100.
fuzz-ci: fuzz-build
	@$(call timed,fuzzing (10 s per target; $(JOBS) at a time),JOBS=$(JOBS) bash scripts/fuzz.sh 10)

lint: format-check unity-check tidy

# Functions two files of one unity batch both keep file-local (scripts/unity_overload_check.py):
# a different signature compiles as an overload that a call may silently pick. Fails the lint.
unity-check: configure
	@$(call timed,unity batch name check,python3 tests/lint/unity_overload_check_test.py && python3 scripts/unity_overload_check.py build)

format-check: setup
	@$(call timed,clang-format check,$(CHECK_FORMAT))

# One clang-format process checks every file (one process per file took 81 s of CPU instead of
# 4); only when it fails, prints clang-format's complaints file by file, then the list of files
# that `make format` would change.
CHECK_FORMAT = clang-format --dry-run --Werror $(FORMAT_FILES) 2>/dev/null && exit 0; \
  bad=(); n=0; for f in $(FORMAT_FILES); do \
    clang-format --dry-run --Werror "$$f" || { bad+=("$$f"); n=$$((n + 1)); }; done; \
  if [ $$n -gt 0 ]; then \
    printf '\n%d of %d files are not clang-formatted (fix: make format):\n' \
      $$n $(words $(FORMAT_FILES)); printf '  %s\n' "$${bad[@]}"; false; fi

# Advisory: prints findings but fails only when clang-tidy cannot parse a file. It takes about
# 1 minute on 2 idle cores (3 on a busy machine), so it runs in `make lint` (and CI), not in
# `make test`.
tidy: configure
	@$(call timed,clang-tidy,$(RUN_TIDY))

RUN_TIDY = run-clang-tidy -p build -quiet -j $(JOBS) $(TIDY_FILES) >build/clang-tidy.log 2>&1 || rc=$$?; \
  sed 's/\x1b\[[0-9;]*m//g' build/clang-tidy.log \
    | grep -v -E '^([0-9]+ warnings? generated|clang-tidy(-[0-9]+)? .* -p=)' || true; \
  printf '%d clang-tidy findings in %d files (full log: build/clang-tidy.log)\n' \
    "$$(sed 's/\x1b\[[0-9;]*m//g' build/clang-tidy.log | grep -cE ': (warning|error): ')" $(words $(TIDY_FILES)); \
  test "$${rc:-0}" -eq 0

format: setup
	clang-format -i $(FORMAT_FILES)

clean:
	rm -rf build build-asan build-fuzz web/dist $(DEMO_OUT) .corral/synthetic.jsonl
