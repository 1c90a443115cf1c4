#!/usr/bin/env bash
# The one command that runs every test of ha-blocks, as CI does:
#   scripts/test.sh
# It installs what the tests need when it is missing (ZooKeeper, kcat and a JRE from Debian's
# packages; the Python clients confluent-kafka and kafka-python from PyPI), then runs formatting; lint with default and with all features; the whole test
# suite with all features (which includes the bounded fuzz runs, the real-ZooKeeper interop
# tests and the real-client tests) and the library crates' tests with default features; a build
# of each library crate without default features; the API docs with warnings denied; and a
# dry run of publishing every publishable crate. Each step prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

# The crates published to crates.io, in dependency order.
LIB_CRATES=(ha-kafka-wire ha-coordination ha-testkit zab-core kafka-replication kafka-controller
            kafka-group-coordinator
            kafka-broker zab-coordination)

need_apt=()
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
# `ip netns` for the real-process fault test's network namespaces.
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> installing ${need_apt[*]} from Debian's packages"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

# The Python clients of the real-client tests (confluent-kafka, the binding of librdkafka;
# kafka-python), from PyPI into a virtual environment; the tests find it through HA_PYTHON.
PY_CLIENTS=(confluent-kafka==2.16.1 kafka-python==3.0.12)
py_venv=${HA_PY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ha-blocks/python}
if ! "$py_venv/bin/python" -c "import confluent_kafka, kafka" >/dev/null 2>&1; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
    echo "==> installing python3 and python3-venv from Debian's packages"
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3 python3-venv
  fi
  echo "==> installing ${PY_CLIENTS[*]} from PyPI into $py_venv"
  rm -rf "$py_venv"
  python3 -m venv "$py_venv"
  "$py_venv/bin/python" -m pip install -q --disable-pip-version-check "${PY_CLIENTS[@]}"
fi
export HA_PYTHON="$py_venv/bin/python"

step() {
  local name=$1
  shift
  echo "==> $name"
  local start=$SECONDS
  "$@"
  echo "<== $name: $((SECONDS - start)) s"
}

no_default_builds() {
  local crate
  for crate in "${LIB_CRATES[@]}"; do
    echo "--> cargo build --no-default-features -p $crate"
    cargo build --no-default-features -p "$crate"
  done
}

default_feature_tests() {
  local args=() crate
  for crate in "${LIB_CRATES[@]}"; do args+=(-p "$crate"); done
  cargo test "${args[@]}" --no-fail-fast
}

step "cargo fmt --check" cargo fmt --all -- --check
step "cargo clippy (default features)" cargo clippy --workspace --all-targets -- -D warnings
step "cargo clippy (all features)" cargo clippy --workspace --all-targets --all-features -- -D warnings
step "cargo test (all features: unit, property, fuzz-bounded, interop)" \
  cargo test --workspace --all-features --no-fail-fast
step "cargo test (library crates, default features)" default_feature_tests
step "cargo build --no-default-features (each library crate)" no_default_builds
step "cargo doc (warnings denied)" \
  env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --all-features
# cargo takes a crate of the dry run's temporary registry for unchanged while its version is,
# so the check builds in a target folder of its own where our crates' old builds and unpacked
# sources are forgotten first; third-party crates stay built there between runs.
publish_dry_run() {
  local dir=target/publish-check
  rm -rf target/package "$dir/package" "$dir"/debug/.fingerprint/{ha-,kafka-,zab-}* \
    "$dir"/debug/deps/lib{ha,kafka,zab}_*
  local src
  for src in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/; do
    [ -d "$src" ] && rm -rf "$src"{ha-,kafka-,zab-}*
  done
  CARGO_TARGET_DIR=$dir cargo publish --workspace --dry-run
}
step "cargo publish --dry-run (every publishable crate)" publish_dry_run
echo "==> all passed"
