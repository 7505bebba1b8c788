#!/usr/bin/env bash
# Creates/updates the small venv with the API document tools (openapi-spec-validator, schemathesis)
# and prints its python. Separate from the training venv and its stamp, so adding a tool here never
# reinstalls torch. Skipped when the stamp matches sha256(requirements + python version).
#   Env: SIFT_API_CHECK_VENV (default <cache>/venv-api-check), SIFT_PYTHON_BASE (default python3).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SIFT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sift}"
VENV="${SIFT_API_CHECK_VENV:-$CACHE/venv-api-check}"
PY="${SIFT_PYTHON_BASE:-python3}"
REQ="$ROOT/scripts/requirements-api-check.txt"

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
STAMP="$VENV/.sift-requirements.sha256"
WANT="$( { cat "$REQ"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
if ! { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/python" ]; }; then
  echo "setup-api-check: installing openapi-spec-validator and schemathesis into $VENV" >&2
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQ"
  echo "$WANT" > "$STAMP"
fi
echo "$VENV/bin/python"
