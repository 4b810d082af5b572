#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine of this project's kind (Debian 12,
# Rust, CPython 3.11): system packages (redis-server, Java, chromium + chromedriver), the package
# itself built from source with every extra, and the test-only Python packages.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-cli >/dev/null || need_apt+=(redis-tools)
command -v java >/dev/null || need_apt+=(default-jre-headless)
command -v javac >/dev/null || need_apt+=(default-jdk-headless)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
# Real text that benches/corpus.py builds its labelled sets from (a test compares the HTML
# extractors on the benchmark's pages).
for p in fortunes fortunes-zh manpages-zh python3-doc debian-reference-en debian-reference-zh-cn \
         debian-handbook; do
    dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: apt-get install ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r requirements-test.txt
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e ".[all]"
