#!/usr/bin/env bash
# Creates/updates one of the tests' own small venvs and prints its python:
#   scripts/setup-test-venv.sh <name>   →  <cache>/venv-<name> from scripts/requirements-<name>.txt
# Separate from the training venv and its stamp (adding a tool here never reinstalls torch, and a
# tool whose pins clash with the trainer's stays out of it). Skipped when the stamp matches
# sha256(requirements + python version).
#   Env: SIFT_<NAME>_VENV (e.g. SIFT_API_CHECK_VENV; default <cache>/venv-<name>), SIFT_PYTHON_BASE (default python3).
set -euo pipefail
NAME="${1:?usage: setup-test-venv.sh <name> (scripts/requirements-<name>.txt)}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SIFT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sift}"
OVERRIDE="SIFT_$(tr 'a-z-' 'A-Z_' <<<"$NAME")_VENV"
VENV="${!OVERRIDE:-$CACHE/venv-$NAME}"
PY="${SIFT_PYTHON_BASE:-python3}"
REQ="$ROOT/scripts/requirements-$NAME.txt"
[ -f "$REQ" ] || { echo "setup-test-venv: no $REQ" >&2; exit 2; }

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
STAMP="$VENV/.sift-requirements.sha256"
WANT="$( { cat "$REQ"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
if ! { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/python" ]; }; then
  echo "setup-test-venv: installing scripts/requirements-$NAME.txt into $VENV" >&2
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQ"
  echo "$WANT" > "$STAMP"
fi
echo "$VENV/bin/python"
