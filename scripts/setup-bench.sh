#!/usr/bin/env bash
# Installs what the benchmarks need: the Debian packages whose text benches/corpus.py builds its
# labelled sets from, and the peers the benchmarks compare against (requirements-bench.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(fortunes fortunes-zh manpages-zh python3-doc debian-reference-en debian-reference-zh-cn
      debian-handbook)
need=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "setup-bench: apt-get install ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${need[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r requirements-bench.txt
