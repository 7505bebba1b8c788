"""Reference side of bench/serving/concurrency.ts: the Python `gliner2` library (PyTorch, CPU) behind a
minimal HTTP server, answering the same `POST /inference` body the Sift service takes
({text, schema: {entities: [...]}, threshold}) with gliner2's own result. One request at a time
runs the model (`--serial`, the default: torch already uses every core per call, and concurrent
calls only contend) or every request in its own thread at once (`--threads`).

usage: ~/.cache/sift/venv/bin/python bench/serving/gliner2_server.py MODEL_DIR PORT [--serial|--threads]
Prints "ready <port>" on stdout once the model is loaded.
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from gliner2 import GLiNER2  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "containers", "training"))
from sift_trainer.export.gliner2_reference import build_schema  # noqa: E402


def main():
    model_dir, port = sys.argv[1], int(sys.argv[2])
    serial = "--threads" not in sys.argv[3:]
    torch.set_num_threads(int(os.environ.get("REF_THREADS", "0")) or torch.get_num_threads())
    model = GLiNER2.from_pretrained(model_dir)
    model.eval()
    lock = threading.Lock() if serial else None

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the load tool expects

        def log_message(self, *args):
            pass

        def do_POST(self):
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                entities = body["schema"]["entities"]
                spec = {"entities": [{"name": e} for e in entities] if isinstance(entities, list) else [{"name": k, "description": v} for k, v in entities.items()]}
                thr = body.get("threshold", 0.5)
                texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
                schema = build_schema(spec, thr)
                with torch.inference_mode():
                    if lock:
                        with lock:
                            out = model.batch_extract(texts, schema, batch_size=len(texts), threshold=thr, include_confidence=True, include_spans=True)
                    else:
                        out = model.batch_extract(texts, schema, batch_size=len(texts), threshold=thr, include_confidence=True, include_spans=True)
                data = json.dumps({"result": out if isinstance(body["text"], list) else out[0]}).encode()
                self.send_response(200)
            except Exception as err:  # a bad body is the client's problem: say so, keep serving
                data = json.dumps({"detail": str(err)}).encode()
                self.send_response(422)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            # the load tool hangs up on requests still queued when a run ends: not an error here
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", port), Handler)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
