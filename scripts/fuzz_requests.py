"""The requests of schemathesis VCR cassettes, one line each, in the order they were sent, with
what differs between two runs of the same cases masked: the server's fresh ids and times, the
per-run key and port, and schemathesis's random case ids. scripts/fuzz-openapi.sh compares two
runs' lines (FUZZ_REPEAT=2) to show the fuzz step is deterministic."""

import json
import re
import sys
from urllib.parse import urlsplit

import yaml

MASKS = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I), "<uuid>"),
    (re.compile(r"svc_sk_[A-Za-z0-9_-]+"), "<key>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z"), "<time>"),
]
# headers schemathesis or the run sets, not the generated case
RUN_HEADERS = {"x-api-key", "x-schemathesis-testcaseid", "user-agent", "content-length", "accept", "accept-encoding", "connection"}


def mask(text: str) -> str:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def interactions(paths):
    for path in paths:
        with open(path) as f:
            cassette = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        yield from cassette.get("http_interactions") or []


def main(paths) -> None:
    for interaction in interactions(paths):
        request = interaction["request"]
        url = urlsplit(request["uri"])
        target = url.path + (f"?{url.query}" if url.query else "")
        headers = {k.lower(): v for k, v in (request.get("headers") or {}).items() if k.lower() not in RUN_HEADERS}
        body = request.get("body") or {}
        text = body.get("string", body.get("base64_string", "")) if isinstance(body, dict) else str(body)
        line = json.dumps([request["method"], target, headers, text], sort_keys=True, ensure_ascii=True)
        print(mask(line))


if __name__ == "__main__":
    main(sys.argv[1:])  # the cassettes of one run, in the order they were written
