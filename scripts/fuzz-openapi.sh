#!/usr/bin/env bash
# Fuzzes the local service against its own OpenAPI document with schemathesis (bounded: a few
# examples per operation, FUZZ_MAX_TIME seconds at most). Fails on any server error (5xx other than
# documented 503s), any request the document allows that the server rejects, any status the
# document does not list, and any `Allow` header that disagrees with the document.
#   npm run fuzz:api            Env: FUZZ_EXAMPLES (5), FUZZ_SEED (1), FUZZ_MAX_TIME (120), FUZZ_REPORT_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$(bash "$ROOT/scripts/setup-api-check.sh")"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sift-fuzz-XXXXXX")"
KEY="svc_sk_fuzz-operator-key-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The service as `npm start` runs it, on 127.0.0.1, in a throw-away data dir, with no model weights
# (inference answers its documented 503) and no training runner (jobs stay `requested`).
cd "$ROOT"
SIFT_ADMIN_KEY="$KEY" SIFT_MAX_TRAINING_JOBS=0 SIFT_MODELS_DIR="$WORK/no-models" SIFT_S3_PORT=0 \
  node --no-warnings --import tsx bin/sift.ts serve --host 127.0.0.1 --port 0 --data-dir "$WORK/data" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
URL=""
for _ in $(seq 1 120); do
  URL="$(sed -n 's/^Sift is listening on \(http:[^ ]*\).*/\1/p' "$WORK/server.log")"
  [ -n "$URL" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; echo "fuzz-openapi: the server did not start" >&2; exit 1; }
  sleep 0.5
done
[ -n "$URL" ] || { echo "fuzz-openapi: the server did not start within 60 s" >&2; exit 1; }

REPORT=()
[ -n "${FUZZ_REPORT_DIR:-}" ] && REPORT=(--report junit --report-dir "$(realpath -m "$FUZZ_REPORT_DIR")")
set +e
cd "$WORK"   # hypothesis keeps its example database in the working directory
"$(dirname "$PY")/schemathesis" --config-file "$ROOT/scripts/schemathesis.toml" run "$URL/openapi.json" \
  -H "X-API-Key: $KEY" \
  --phases examples,coverage,fuzzing \
  --checks "${FUZZ_CHECKS:-not_a_server_error,status_code_conformance,positive_data_acceptance,unsupported_method,allow_header_conformance,response_schema_conformance,content_type_conformance}" \
  -n "${FUZZ_EXAMPLES:-5}" --seed "${FUZZ_SEED:-1}" --max-time "${FUZZ_MAX_TIME:-120}" \
  --workers 1 --no-shrink --suppress-health-check all --warnings off \
  "${REPORT[@]}"
status=$?
set -e
if [ "$status" -ne 0 ] && grep -q '"level": *"error"\|unhandled error' "$WORK/server.log"; then
  echo "--- server log (errors) ---" >&2
  grep '"level": *"error"\|unhandled error' "$WORK/server.log" | tail -20 >&2
fi
exit "$status"
