#!/usr/bin/env bash
# The one command that runs every test of ha-blocks, as CI does:
#   scripts/test.sh
# It installs what the tests need when it is missing (ZooKeeper and kcat from Debian's
# packages), then runs formatting, lint, the whole test suite (which includes the bounded fuzz
# runs, the real-ZooKeeper interop tests and the real-client tests).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> installing ${need_apt[*]} from Debian's packages"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings

echo "==> cargo test (unit, property, fuzz-bounded, interop)"
cargo test --workspace --all-features --no-fail-fast
