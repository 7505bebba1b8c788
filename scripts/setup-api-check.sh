#!/usr/bin/env bash
# The API document tools' venv (openapi-spec-validator, schemathesis; scripts/requirements-api-check.txt):
# prints its python. Env: SIFT_API_CHECK_VENV, SIFT_PYTHON_BASE (scripts/setup-test-venv.sh).
exec bash "$(dirname "${BASH_SOURCE[0]}")/setup-test-venv.sh" api-check
