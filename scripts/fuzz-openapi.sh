#!/usr/bin/env bash
# Fuzzes the local service against its own OpenAPI document with schemathesis. Fails on any server
# error (5xx other than documented 503s), any request the document allows that the server rejects,
# any status the document does not list, and any `Allow` header that disagrees with the document.
#
# Deterministic: every operation gets the coverage phase's fixed set of cases plus FUZZ_EXAMPLES
# fuzzed ones, generated with Hypothesis derandomized (`--generation-deterministic`: a seed derived
# from each test, so `--seed` is not used, and no example database). There is no time budget: a
# `--max-time` makes schemathesis repeat fuzzing until the time is spent, so how many cases ran, and
# which states they met, depended on the machine's speed. Ids from earlier 2xx answers are reused (a
# team just created is topped up), so every run meets states such as a team billed in arrears; those
# fresh ids are all that differs between two runs' requests (scripts/fuzz_requests.py masks them).
# Settings that keep the server's answers from shaping the cases are in scripts/schemathesis.toml.
#
#   npm run fuzz:api
#   Env: FUZZ_EXAMPLES (fuzzed cases per operation, 5), FUZZ_REPORT_DIR (JUnit report, server logs),
#        FUZZ_INCLUDE (a regex of operation names, e.g. '^POST /teams', to fuzz only those),
#        FUZZ_REPEAT=2 (run twice, each on a fresh server, and fail unless both sent the same requests;
#        test/http/fuzzDeterminism.test.ts does this on a few operations),
#        FUZZ_REQUESTS_OUT (write the run's requests, normalized as compared, to this file).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$(bash "$ROOT/scripts/setup-api-check.sh")"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sift-fuzz-XXXXXX")"
# svc_sk_ + 32 hex characters of randomness: SIFT_ADMIN_KEY must be as long as a generated key's
KEY="svc_sk_fuzz-operator-key-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
REPEAT="${FUZZ_REPEAT:-1}"
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  SERVER_PID=""
}
cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT

# The service as `npm start` runs it, on 127.0.0.1, in a throw-away data dir, with no model weights
# (inference answers its documented 503) and no training runner (jobs stay `requested`).
start_server() { # $1: the run's directory; sets SERVER_PID and URL
  cd "$ROOT"
  SIFT_ADMIN_KEY="$KEY" SIFT_MAX_TRAINING_JOBS=0 SIFT_MODELS_DIR="$1/no-models" SIFT_S3_PORT=0 \
    node --no-warnings --import tsx bin/sift.ts serve --host 127.0.0.1 --port 0 --data-dir "$1/data" >"$1/server.log" 2>&1 &
  SERVER_PID=$!
  URL=""
  for _ in $(seq 1 120); do
    URL="$(sed -n 's/^Sift is listening on \(http:[^ ]*\).*/\1/p' "$1/server.log")"
    [ -n "$URL" ] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$1/server.log" >&2; echo "fuzz-openapi: the server did not start" >&2; exit 1; }
    sleep 0.5
  done
  echo "fuzz-openapi: the server did not start within 60 s" >&2
  exit 1
}

# Two passes on one server. Schemathesis reuses ids from earlier answers, and GET /api-keys lists the
# operator key's own id, which any operator key may revoke (DELETE /api-keys/{id}); revoked in the
# middle of a run, every later case would be answered 401, which every check accepts. So the first
# pass fuzzes every other operation, and the second the key operations alone, last.
KEYS_OPS='^(POST /api-keys|GET /api-keys|DELETE /api-keys/\{id\})$'
if [ -n "${FUZZ_INCLUDE:-}" ]; then
  PASSES=("--include-name-regex|$FUZZ_INCLUDE")
else
  PASSES=("--exclude-name|DELETE /api-keys/{id}" "--include-name-regex|$KEYS_OPS")
fi

fuzz_pass() { # $1: the run's directory, $2: its pass number, $3: "option|value" choosing operations
  local run="$1" n="$2" report=(--report vcr --report-vcr-path "$1/cassette-$2.yaml")
  if [ -n "${FUZZ_REPORT_DIR:-}" ]; then
    local dir
    dir="$(realpath -m "$FUZZ_REPORT_DIR")"
    report=(--report junit,vcr --report-dir "$dir" --report-junit-path "$dir/junit-$(basename "$run")-$n.xml" --report-vcr-path "$run/cassette-$n.yaml")
  fi
  (
    cd "$run" # Hypothesis writes here; deterministic generation keeps no example database
    "$(dirname "$PY")/schemathesis" --config-file "$ROOT/scripts/schemathesis.toml" run "$URL/openapi.json" \
      -H "X-API-Key: $KEY" \
      --phases examples,coverage,fuzzing \
      --checks "${FUZZ_CHECKS:-not_a_server_error,status_code_conformance,positive_data_acceptance,unsupported_method,allow_header_conformance,response_schema_conformance,content_type_conformance}" \
      -n "${FUZZ_EXAMPLES:-5}" --generation-deterministic \
      --workers 1 --no-shrink --suppress-health-check all --warnings off \
      "${3%%|*}" "${3#*|}" "${report[@]}"
  )
}

run_once() { # $1: the run's directory; returns non-zero when a pass failed
  local run="$1" status=0 n=0 pass auth
  mkdir -p "$run"
  start_server "$run"
  for pass in "${PASSES[@]}"; do
    n=$((n + 1))
    fuzz_pass "$run" "$n" "$pass" || status=$?
    # the key must still work after every pass but the key operations' own (which may revoke it last)
    if [ "$pass" != "--include-name-regex|$KEYS_OPS" ]; then
      auth="$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $KEY" "$URL/api-keys" || true)"
      if [ "$auth" != "200" ]; then
        echo "fuzz-openapi: after pass $n the operator key answers $auth on GET /api-keys: the pass revoked it, so its later cases tested nothing" >&2
        status=1
      fi
    fi
  done
  if [ "$status" -ne 0 ] && grep -q '"level": *"error"\|unhandled error' "$run/server.log"; then
    echo "--- server log (errors) ---" >&2
    grep '"level": *"error"\|unhandled error' "$run/server.log" | tail -20 >&2
  fi
  stop_server
  [ -n "${FUZZ_REPORT_DIR:-}" ] && cp "$run/server.log" "$(realpath -m "$FUZZ_REPORT_DIR")/server-$(basename "$run").log"
  ls "$run"/cassette-*.yaml >/dev/null 2>&1 || { echo "fuzz-openapi: schemathesis sent no requests (exit status $status)" >&2; return 1; }
  "$PY" "$ROOT/scripts/fuzz_requests.py" "$run"/cassette-*.yaml >"$run/requests.txt" || return 1
  echo "fuzz-openapi: $(wc -l <"$run/requests.txt") requests sent" >&2
  return "$status"
}

status=0
for i in $(seq 1 "$REPEAT"); do
  run_once "$WORK/run-$i" || status=$?
done
[ -n "${FUZZ_REQUESTS_OUT:-}" ] && cp "$WORK/run-1/requests.txt" "$FUZZ_REQUESTS_OUT"
if [ "$REPEAT" -gt 1 ]; then
  for i in $(seq 2 "$REPEAT"); do
    if ! cmp -s "$WORK/run-1/requests.txt" "$WORK/run-$i/requests.txt"; then
      echo "fuzz-openapi: run $i sent other requests than run 1 (the fuzz step is not deterministic):" >&2
      diff -u "$WORK/run-1/requests.txt" "$WORK/run-$i/requests.txt" | head -40 >&2 || true
      exit 1
    fi
  done
  echo "fuzz-openapi: $REPEAT runs sent the same $(wc -l <"$WORK/run-1/requests.txt") requests" >&2
fi
exit "$status"
