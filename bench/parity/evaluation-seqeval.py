"""Sift's evaluation scorer vs seqeval on WNUT17 NER: micro and per-type precision / recall / F1.

Three scorers over the same gold rows and the same predictions:

  seqeval  seqeval.metrics (conlleval-style chunk matching) over IOB2 tags on whitespace tokens: a
           span tags every token it overlaps (B- on the first, I- after).
  sift-ts  src/core/evaluation/scoring/index.ts through bench/parity/evaluation-score.ts (exact label + start +
           end in code points; rows scored in shards and merged, as an evaluation does).
  trainer  containers/training/sift_trainer/data/metrics.py (the same rules in Python, via from_api_result).

Predictions are, by default, made from the gold deliberately imperfect but deterministic (k = the
gold entity's index over the file, i = the row's index):
  k % 5 == 4   dropped                                  (a false negative)
  k % 7 == 6   shifted one whitespace token to the right (fp + fn for everyone)
  k % 11 == 10 relabelled to the next entity type        (fp + fn for everyone)
  k % 9 == 8   last character trimmed                    (fp + fn for Sift; invisible to seqeval when
                                                          the token still overlaps)
  i % 13 == 0  one spurious `person` on the first token outside every gold span
or read with --predictions from a JSONL file of encoder API `result` objects, one per row (for
example saved from POST /inference with the evaluation schema).

Expected differences: seqeval sees tokens, not characters. A span not aligned to whitespace tokens
(WNUT17's "@user:"-style tokens, "(ART)") is widened to the tokens it touches, so boundary errors
inside a token are invisible to seqeval, and two spans touching one token collapse into one chunk.
Sift-ts and trainer must agree exactly (max difference 0).

Needs seqeval (not in the training image): ~/.cache/sift/venv/bin/pip install seqeval==1.2.2
(it pulls scikit-learn). Run from the repo root:

  ~/.cache/sift/venv/bin/python bench/parity/evaluation-seqeval.py [--data ../shared/data/wnut17/test.jsonl]
                                                            [--predictions preds.jsonl] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))

TOKEN = re.compile(r"\S+")


def tokens(text: str) -> List[Tuple[int, int]]:
    return [(m.start(), m.end()) for m in TOKEN.finditer(text)]


def make_predictions(rows: List[Dict[str, Any]], trim: bool = True) -> Tuple[List[Dict[str, Any]], Dict[str, int]]:
    labels = sorted({e["label"] for r in rows for e in r.get("entities", [])})
    stats = {"dropped": 0, "shifted": 0, "relabelled": 0, "trimmed": 0, "spurious": 0, "kept": 0}
    out = []
    k = -1
    for i, r in enumerate(rows):
        text, toks, ents = r["text"], tokens(r["text"]), []
        for e in r.get("entities", []):
            k += 1
            s, t, lab = e["start"], e["end"], e["label"]
            if k % 5 == 4:
                stats["dropped"] += 1
                continue
            if k % 7 == 6:
                covered = [j for j, (a, b) in enumerate(toks) if a < t and b > s]
                if covered and covered[-1] + 1 < len(toks):
                    j0, j1 = covered[0] + 1, covered[-1] + 1
                    s, t = toks[j0][0], toks[j1][1]
                    stats["shifted"] += 1
                else:
                    stats["kept"] += 1  # already on the last token: left as is
            elif k % 11 == 10:
                lab = labels[(labels.index(lab) + 1) % len(labels)]
                stats["relabelled"] += 1
            elif trim and k % 9 == 8 and t - s >= 2:
                t -= 1
                stats["trimmed"] += 1
            else:
                stats["kept"] += 1
            ents.append({"text": text[s:t], "label": lab, "score": 0.9, "start": s, "end": t})
        if i % 13 == 0:
            gold = [(e["start"], e["end"]) for e in r.get("entities", [])]
            free = [(a, b) for (a, b) in toks if not any(a < t and b > s for s, t in gold)]
            if free:
                a, b = free[0]
                ents.append({"text": text[a:b], "label": "person", "score": 0.55, "start": a, "end": b})
                stats["spurious"] += 1
        ents.sort(key=lambda x: (x["start"], x["end"]))
        out.append({"entities": ents})
    return out, stats


def iob2(text: str, spans: List[Tuple[int, int, str]]) -> List[str]:
    toks = tokens(text)
    tags = ["O"] * len(toks)
    for s, t, lab in sorted(spans):
        idx = [j for j, (a, b) in enumerate(toks) if a < t and b > s]
        if not idx or any(tags[j] != "O" for j in idx):
            continue  # a token carries one tag: the first span wins
        lab = lab.replace(" ", "_")
        tags[idx[0]] = "B-" + lab
        for j in idx[1:]:
            tags[j] = "I-" + lab
    return tags


def seqeval_scores(rows, preds) -> Dict[str, Any]:
    from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

    y_true = [iob2(r["text"], [(e["start"], e["end"], e["label"]) for e in r.get("entities", [])]) for r in rows]
    y_pred = [iob2(r["text"], [(e["start"], e["end"], e["label"]) for e in (p or {}).get("entities", [])]) for r, p in zip(rows, preds)]
    rep = classification_report(y_true, y_pred, output_dict=True, zero_division=0)
    per = {k.replace("_", " "): {"precision": v["precision"], "recall": v["recall"], "f1": v["f1-score"], "support": int(v["support"])}
           for k, v in rep.items() if not k.endswith(" avg")}
    return {"precision": precision_score(y_true, y_pred, zero_division=0), "recall": recall_score(y_true, y_pred, zero_division=0),
            "f1": f1_score(y_true, y_pred, zero_division=0), "per_entity": per}


def ts_scores(rows_path: Path, preds_path: Path) -> Dict[str, Any]:
    tsx = REPO / "node_modules" / ".bin" / "tsx"
    p = subprocess.run([str(tsx), "bench/parity/evaluation-score.ts", str(rows_path), str(preds_path)], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench/parity/evaluation-score.ts failed:\n{p.stderr}")
    return {**json.loads(p.stdout), "_timing": p.stderr.strip()}


def trainer_scores(rows, preds) -> Dict[str, Any]:
    from sift_trainer.data.rows import infer_tasks
    from sift_trainer.data.metrics import from_api_result, score_predictions

    t0 = time.perf_counter()
    m = score_predictions(rows, [from_api_result(p) for p in preds], infer_tasks(rows))
    m["_timing"] = f"scored {len(rows)} rows in {1000 * (time.perf_counter() - t0):.1f} ms"
    return m


def score_all(rows, preds) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    with tempfile.TemporaryDirectory() as d:
        rp, pp = Path(d) / "rows.jsonl", Path(d) / "preds.jsonl"
        rp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        pp.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in preds), encoding="utf-8")
        ts = ts_scores(rp, pp)
    return seqeval_scores(rows, preds), ts, trainer_scores(rows, preds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "wnut17" / "test.jsonl"))
    ap.add_argument("--predictions", help="JSONL of encoder API results, one per row (default: deterministic perturbation of the gold)")
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    try:
        import seqeval  # noqa: F401
    except ImportError:
        raise SystemExit("seqeval is not installed: ~/.cache/sift/venv/bin/pip install seqeval==1.2.2")

    rows = [json.loads(l) for l in Path(a.data).read_text(encoding="utf-8").splitlines() if l.strip()]
    if a.limit:
        rows = rows[: a.limit]
    if a.predictions:
        preds = [json.loads(l) for l in Path(a.predictions).read_text(encoding="utf-8").splitlines() if l.strip()][: len(rows)]
        stats = {"from": a.predictions}
    else:
        preds, stats = make_predictions(rows)
    gold = [(r["text"], e) for r in rows for e in r.get("entities", [])]
    unaligned = sum(1 for text, e in gold if not (any(s == e["start"] for s, _ in tokens(text)) and any(t == e["end"] for _, t in tokens(text))))
    sq, ts, py = score_all(rows, preds)

    print(f"data: {a.data} ({len(rows)} rows, {len(gold)} gold entities, {unaligned} not aligned to whitespace tokens)")
    print(f"predictions: {stats}")
    hdr = f"{'':16} {'support':>7} | {'seqeval P':>9} {'R':>8} {'F1':>8} | {'sift-ts P':>9} {'R':>8} {'F1':>8} | {'trainer P':>9} {'R':>8} {'F1':>8} | {'|ts-seq| max':>12}"
    print(hdr)
    print("-" * len(hdr))
    d_seq, d_py = 0.0, 0.0

    def line(name, support, s, t, p):
        nonlocal d_seq, d_py
        ds = max(abs(s[k] - t[k]) for k in ("precision", "recall", "f1"))
        dp = max(abs(p[k] - t[k]) for k in ("precision", "recall", "f1"))
        d_seq, d_py = max(d_seq, ds), max(d_py, dp)
        print(f"{name:16} {support:>7} | {s['precision']:9.4f} {s['recall']:8.4f} {s['f1']:8.4f} | {t['precision']:9.4f} {t['recall']:8.4f} {t['f1']:8.4f} | "
              f"{p['precision']:9.4f} {p['recall']:8.4f} {p['f1']:8.4f} | {ds:12.4f}")

    zero = {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    for lab in sorted(set(ts.get("per_entity", {})) | set(sq["per_entity"])):
        t = ts["per_entity"].get(lab, zero)
        line(lab, t["support"], sq["per_entity"].get(lab, zero), t, py.get("per_entity", {}).get(lab, zero))
    line("micro", ts["support"].get("entities", 0), sq, ts, py)
    print()
    print(f"max |sift-ts - seqeval| = {d_seq:.4f}   max |sift-ts - trainer| = {d_py:.6f}")
    print(f"timing: sift-ts {ts['_timing']}; trainer {py['_timing']}")
    if not a.predictions:
        sq2, ts2, _ = score_all(rows, make_predictions(rows, trim=False)[0])
        gap = max(abs(sq2[k] - ts2[k]) for k in ("precision", "recall", "f1"))
        print(f"control, same predictions without the sub-token trims: micro F1 seqeval {sq2['f1']:.4f} vs sift-ts {ts2['f1']:.4f} "
              f"(max |P/R/F1 difference| {gap:.4f})")
    if d_py > 1e-6:
        print("!! the TypeScript scorer and the trainer's metrics.py disagree: they implement the same rules (docs/reference/evaluation.md)")
    print("seqeval matches IOB2 chunks over whitespace tokens; Sift matches exact (label, start, end) in code points. The gap\n"
          "comes from spans that are not whitespace-token aligned: a prediction that is off by characters inside a token\n"
          "(the 'trimmed' ones above) is a hit for seqeval and a miss (fp + fn) for Sift, and a token carries one IOB2 tag,\n"
          "so spans sharing a token collapse into one chunk (the small residual of the control run: shifted predictions\n"
          "landing on a token another prediction already tags). Sift-ts and the trainer implement the same rules and agree exactly.")


if __name__ == "__main__":
    main()
