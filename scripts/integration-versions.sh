#!/usr/bin/env bash
# Opt-in: the framework integrations' tests against the oldest and the newest
# release of each framework's range (pyproject.toml's extras), each set in a
# venv of its own that sees the system packages (torch 2.13.0 CPU among
# them). torch is a constraint of every install, so no framework can replace
# it. CI runs the pinned versions of requirements-dev.txt instead; this step
# downloads the frameworks (about 170 MB installed per set) and takes minutes.
#
#   CXLP_INTEGRATION_VERSIONS=1 scripts/integration-versions.sh [floor|newest]...
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${CXLP_INTEGRATION_VERSIONS:-0}" = 1 ] || {
  echo "integration-versions.sh: opt-in, set CXLP_INTEGRATION_VERSIONS=1"; exit 0; }
PY=${PYTHON:-python3}
declare -A SETS=(
  [floor]="megatron-core==0.14.0 lightning==2.5.0 transformers==5.0.0 accelerate==1.10.0 torchdata==0.10.0"
  [newest]="megatron-core==0.16.1 lightning==2.6.6 transformers==5.25.0 accelerate==1.16.0 torchdata==0.11.0"
)
TESTS=(tests/python/test_integrations_megatron.py tests/python/test_integrations_train.py
       tests/python/test_integrations_torchdata.py)
rc=0
for set in "${@:-floor newest}"; do
  for s in $set; do
    venv=$(mktemp -d "${TMPDIR:-/tmp}/cxlp-int-$s.XXXXXX")
    "$PY" -m venv --system-site-packages "$venv"
    echo "torch==2.13.0" > "$venv/constraints.txt"
    echo "== $s: ${SETS[$s]}"
    "$venv/bin/pip" install -q -c "$venv/constraints.txt" ${SETS[$s]}
    "$venv/bin/pip" install -q --no-build-isolation --no-deps .
    "$venv/bin/python" -c 'import torch; assert torch.__version__.startswith("2.13.0"), torch.__version__'
    "$venv/bin/pip" list 2>/dev/null | grep -iE '^(megatron-core|lightning|transformers|accelerate|torchdata|torch) '
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}" || rc=1
    rm -rf "$venv"
  done
done
exit $rc
