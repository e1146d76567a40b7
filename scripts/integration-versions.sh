#!/usr/bin/env bash
# Opt-in: the framework integrations' tests against the oldest and the newest
# release of each framework's range (pyproject.toml's extras). Each framework
# at each end gets a venv of its own that sees the system packages (torch
# 2.13.0 CPU among them), as a user installs one framework: floors pull
# older dependencies (megatron-core 0.14 takes numpy < 2) that other
# frameworks' imports (pandas, through transformers) refuse. torch is a
# constraint of every install, so no framework can replace it. CI runs the
# pinned versions of requirements-dev.txt instead; this step downloads the
# frameworks (about 170 MB installed in all) and takes minutes.
#
#   CXLP_INTEGRATION_VERSIONS=1 scripts/integration-versions.sh [floor] [newest]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${CXLP_INTEGRATION_VERSIONS:-0}" = 1 ] || {
  echo "integration-versions.sh: opt-in, set CXLP_INTEGRATION_VERSIONS=1"; exit 0; }
PY=${PYTHON:-python3}
declare -A PKGS=(
  [floor-megatron]="megatron-core==0.14.0"
  [floor-lightning]="lightning==2.5.0"
  [floor-hf]="transformers==5.0.0 accelerate==1.10.0"
  [floor-torchdata]="torchdata==0.10.0"
  [newest-megatron]="megatron-core==0.16.1"
  [newest-lightning]="lightning==2.6.6"
  [newest-hf]="transformers==5.25.0 accelerate==1.16.0"
  [newest-torchdata]="torchdata==0.11.0"
)
declare -A TESTS=(
  [megatron]="tests/python/test_integrations_megatron.py"
  [lightning]="tests/python/test_integrations_train.py -k lightning"
  [hf]="tests/python/test_integrations_train.py -k hf"
  [torchdata]="tests/python/test_integrations_torchdata.py"
)
rc=0
for end in "${@:-floor newest}"; do
  for end1 in $end; do
    for fw in megatron lightning hf torchdata; do
      set_=$end1-$fw
      venv=$(mktemp -d "${TMPDIR:-/tmp}/cxlp-int-$set_.XXXXXX")
      "$PY" -m venv --system-site-packages "$venv"
      echo "torch==2.13.0" > "$venv/constraints.txt"
      echo "== $set_: ${PKGS[$set_]}"
      "$venv/bin/pip" install -q -c "$venv/constraints.txt" ${PKGS[$set_]}
      "$venv/bin/pip" install -q --no-build-isolation --no-deps .
      "$venv/bin/python" -c 'import torch; assert torch.__version__.startswith("2.13.0"), torch.__version__'
      # shellcheck disable=SC2086
      (cd /tmp && "$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore \
        $(for t in ${TESTS[$fw]}; do case $t in tests/*) echo "$OLDPWD/$t";; *) echo "$t";; esac; done)) \
        || rc=1
      rm -rf "$venv"
    done
  done
done
exit $rc
