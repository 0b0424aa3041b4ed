#!/usr/bin/env bash
# Installs the Debian packages corral needs, per target. Idempotent: packages already present are
# skipped, so `make` targets may call it every time at almost no cost.
#
#   bootstrap.sh run    what `make run` needs: a compiler, CMake, ccache, the C++ libraries the
#                       binary builds against, and node/npm for the dashboard
#   bootstrap.sh test   all of `run`, plus what `make test`, `make bench` and `make lint` need:
#                       GoogleTest and Google Benchmark, PostgreSQL, Prometheus, PyTorch, podman,
#                       Chromium, iproute2, clang-format/clang-tidy, clang and libFuzzer (the
#                       default)
set -euo pipefail

target=${1:-test}

# `make run`: build/corral, build/corral-daemon, build/corral-supervise and the dashboard.
run_packages=(
  build-essential cmake ccache pkg-config git
  lld  # the linker (CMakeLists.txt, CORRAL_LLD): a quarter of GNU ld's CPU time on the test binaries
  nlohmann-json3-dev libcli11-dev
  libsqlite3-dev  # store/: SQLite, the embedded default
  libpq-dev  # store/: the PostgreSQL client's header (libpq itself is loaded only for postgres:// URLs)
  libcpp-httplib-dev libssl-dev  # agent/, cli/: HTTP(S) clients; server/: the session proxy
  libmicrohttpd-dev  # server/: the API's HTTP(S) server (server/http/http_server.h)
  libyaml-cpp-dev  # cli/: YAML job specs
  libglpk-dev  # sim/: the LP solver of `corral sim bound` (sim/fill_bound.h)
  coinor-libcbc-dev  # sim/: the MIP solver of `corral sim bound --exact-nodes` (sim/fill_bound.h)
)

# `make test` (and bench, lint) on top of that.
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format clang-tidy
  # `make fuzz` (fuzz/, docs/security.md "Fuzzing"): libFuzzer's targets are built by clang
  # (g++ has no libFuzzer), and libFuzzer's library and headers come in their own package.
  clang-14 libfuzzer-14-dev
  time  # GNU time (/usr/bin/time): bench/macro.sh measures wall time and peak memory
  postgresql  # PostgreSQL 15 server for the store tests (scripts/with_postgres.sh)
  python3  # tests/e2e_test.py
  # clients/python/ (docs/python.md): its offline venv install and lambdas that travel
  python3-venv python3-setuptools python3-wheel python3-cloudpickle
  python3-torch  # tests/distributed_test.py: real PyTorch DDP (gloo, CPU) across two agents
  iproute2  # tests/distributed_test.py: network namespaces as separate hosts
  prometheus  # tests/e2e_monitoring_test.py: a real Prometheus scrapes GET /metrics
  # The agent's container runtime and its tests (src/agent/container_runtime_test.cc): podman
  # with runc (crun refuses hybrid cgroups), catatonit for `run --init` (only recommended by
  # podman, and recommends are not installed here), busybox for the test image.
  podman runc catatonit busybox-static
  # The dashboard's browser tests (tests/web/): headless Chromium driven by playwright-core,
  # with a font for legible screenshots.
  chromium fonts-dejavu-core
)

case "$target" in
  run) packages=("${run_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  *)
    echo "usage: $0 [run|test]  (default: test)" >&2
    exit 2
    ;;
esac

# The dashboard (web/) builds with node and npm (node >= 18; Debian 12 has 18). A node
# installed some other way (NodeSource, which bundles npm) is used as it is: Debian's npm
# package would conflict with it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
elif [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 18 ]; then
  echo "bootstrap: node $(node --version) is too old for the dashboard (web/ needs >= 18)" >&2
  exit 1
fi

# One dpkg-query for all of them: the check runs before every make target.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null |
  awk '$NF == "installed" && $(NF - 1) == "ok" { print $1 }' || true)
missing=()
for p in "${packages[@]}"; do
  grep -qxF "$p" <<<"$installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap ($target): installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
