#!/usr/bin/env bash
# Runs the pinned ruff (scripts/requirements-lint.txt) with the given arguments, installing it first
# into its own small venv when missing or when the pin changed (stamp: sha256 of the requirements
# and the Python version), so `npm run lint:py` works on a fresh machine. Config: containers/ruff.toml.
#   Env: SIFT_LINT_VENV (default <cache>/venv-lint), SIFT_PYTHON_BASE (default python3).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SIFT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sift}"
VENV="${SIFT_LINT_VENV:-$CACHE/venv-lint}"
PY="${SIFT_PYTHON_BASE:-python3}"
REQ="$ROOT/scripts/requirements-lint.txt"

mkdir -p "$(dirname "$VENV")"
STAMP="$VENV/.sift-requirements.sha256"
WANT="$( { cat "$REQ"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
if ! { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/ruff" ]; }; then
  (
    flock 9
    if ! { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/ruff" ]; }; then
      echo "ruff.sh: installing $(grep -v '^#' "$REQ" | tr '\n' ' ')into $VENV" >&2
      [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
      "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQ"
      echo "$WANT" > "$STAMP"
    fi
  ) 9>"$VENV.lock"
fi
exec "$VENV/bin/ruff" "$@"
