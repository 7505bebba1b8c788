/**
 * The boundary architecture's decoding (src/encoder/boundary.ts) against the gliner2 library's own rules:
 * `resolveOverlaps` under every overlap policy equals `gliner2.inference.overlap.resolve_overlaps` (run in
 * Python on the same generated candidate sets, full of exact ties), the relation edges' de-duplication equals
 * `BoundaryExtractor._deduplicate_relation_edges` on generated edges over nested and repeated mentions, and
 * one record's entities honour the abstention head, the per-label threshold and the library's "a span touching
 * the prefix is dropped" rule — paths the random-weight checkpoint of test/local/boundaryModel.test.ts does not
 * reach (its abstention head is zero-initialised, as gliner2 builds it, so it never abstains; its few
 * relation edges seldom repeat a mention).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  decodeBoundaryRecord,
  deduplicateRelationEdges,
  resolveOverlaps,
  type BoundaryScores,
} from '../../src/encoder/boundary';
import type { PromptTask } from '../../src/encoder/schema';
import type { EncodedRecord, FragmentConfig } from '../../src/encoder/types';
import { DEFAULT_PYTHON, REPO_ROOT } from '../../src/paths';

/** Candidate sets from a fixed linear congruential sequence: the same sets every run, ties on purpose. */
function candidateSets(n: number): Array<Array<{ start: number; end: number; score: number }>> {
  let x = 12345;
  const next = (m: number) => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x % m;
  };
  return Array.from({ length: n }, () =>
    Array.from({ length: 1 + next(12) }, () => {
      const start = next(10);
      return { start, end: start + 1 + next(5), score: [0.5, 0.6, 0.75, 0.9][next(4)]! };
    }),
  );
}

const PY = `
import json, sys
from gliner2.inference.overlap import resolve_overlaps
sets = json.load(sys.stdin)
out = {}
for policy in ("disallow", "nested", "longest", "allow"):
    out[policy] = [
        [[c["start"], c["end"], c["score"]] for c in resolve_overlaps(s, policy, score=lambda c: c["score"], start=lambda c: c["start"], end=lambda c: c["end"])]
        for s in sets
    ]
print(json.dumps(out))
`;

/** A candidate as the scoring step leaves it (its relation-ranking fields are not read here). */
const cand = (start: number, end: number, score: number) => ({ start, end, score, raw: score, slot: 0 });

describe('boundary decoding', () => {
  it('resolves overlaps as gliner2 does under every policy', () => {
    const sets = candidateSets(200);
    const library = JSON.parse(
      execFileSync(DEFAULT_PYTHON, ['-c', PY], {
        input: JSON.stringify(sets),
        cwd: join(REPO_ROOT, 'containers', 'training'),
        encoding: 'utf8',
      }),
    ) as Record<string, number[][][]>;
    for (const policy of ['disallow', 'nested', 'longest', 'allow']) {
      const ours = sets.map((s) => resolveOverlaps(s, policy).map((c) => [c.start, c.end, c.score]));
      expect(ours).toEqual(library[policy]);
    }
    // the sets do exercise each policy: some lose spans to it, some keep nested ones
    expect(library.disallow!.some((r, i) => r.length < new Set(sets[i]!.map((c) => `${c.start}:${c.end}`)).size)).toBe(
      true,
    );
    expect(library.nested!.some((r, i) => r.length > library.disallow![i]!.length)).toBe(true);
  });

  it('de-duplicates relation edges as gliner2 does', () => {
    // mentions over a text with repeated and nested names, so every rule of the de-duplication applies
    const text = 'Ada Lovelace met Ada at Acme Corp and ACME corp in London';
    const mentions = [
      [0, 3],
      [0, 12],
      [4, 12],
      [17, 20],
      [24, 28],
      [24, 33],
      [38, 47],
      [51, 57],
    ].map(([start, end]) => ({ text: text.slice(start, end), start: start!, end: end! }));
    let x = 7;
    const next = (m: number) => {
      x = (x * 1103515245 + 12345) % 2147483648;
      return x % m;
    };
    const sets = Array.from({ length: 60 }, () =>
      Array.from({ length: 2 + next(10) }, () => {
        const h = mentions[next(mentions.length)]!;
        const t = mentions[next(mentions.length)]!;
        return {
          score: [0.6, 0.7, 0.8][next(3)]!,
          head: { ...h, score: 0.5 + next(5) / 10 },
          tail: { ...t, score: 0.5 + next(5) / 10 },
        };
      }),
    );
    const py = `
import json, sys
from gliner2.models.boundary.engine import BoundaryExtractor
side = lambda m: (m["text"], m["start"], m["end"], m["score"])
out = []
for edges in json.load(sys.stdin):
    kept = BoundaryExtractor._deduplicate_relation_edges([{"score": e["score"], "head": side(e["head"]), "tail": side(e["tail"])} for e in edges])
    out.append([[e["score"], list(e["head"]), list(e["tail"])] for e in kept])
print(json.dumps(out))
`;
    const library = JSON.parse(
      execFileSync(DEFAULT_PYTHON, ['-c', py], {
        input: JSON.stringify(sets),
        cwd: join(REPO_ROOT, 'containers', 'training'),
        encoding: 'utf8',
      }),
    ) as unknown[];
    const side = (m: { text: string; start: number; end: number; score: number }) => [m.text, m.start, m.end, m.score];
    expect(
      sets.map((edges) => deduplicateRelationEdges(edges).map((e) => [e.score, side(e.head), side(e.tail)])),
    ).toEqual(library);
    // the rules did fire: some sets lost edges
    expect(library.some((kept, i) => (kept as unknown[]).length < sets[i]!.length)).toBe(true);
  });

  it('abstains per label, cuts at each label threshold and drops spans that touch the prefix', () => {
    // prefix words: "(", "mode", ":" — text words: "ada", "met", "bob", "."
    const record: EncodedRecord = {
      textIndex: 0,
      text: 'ada met bob.',
      offset: 100,
      words: ['ada', 'met', 'bob', '.'],
      starts: [0, 4, 8, 11],
      ends: [3, 7, 11, 12],
      prefix: ['(', 'mode', ':'],
      ids: [],
      wordPos: [],
      taskPos: [],
    };
    const tasks: PromptTask[] = [
      {
        kind: 'entities',
        name: 'entities',
        tokens: [],
        fields: ['person', 'verb', 'city'],
        entities: [{ name: 'person' }, { name: 'verb', threshold: 0.95 }, { name: 'city' }],
      } as PromptTask,
    ];
    const scores: BoundaryScores = {
      candidates: [
        [
          // person: "ada", "bob", one span [2, 4) that starts in the prefix (word 2 is ":"), one under 0.5
          [cand(3, 4, 0.9), cand(5, 6, 0.8), cand(2, 4, 0.99), cand(5, 7, 0.4)],
          [cand(4, 5, 0.9)], // verb: under its own 0.95 threshold
          [cand(5, 6, 0.97)], // city: abstained
        ],
      ],
      abstain: [[0.2, 0.2, 0.51]],
      query: new Map([
        ['0:0', 0],
        ['0:1', 1],
        ['0:2', 2],
      ]),
      choices: new Map(),
      relations: new Map(),
      clsLogits: new Map(),
    };
    const config = { hidden_size: 4, overlap_policy: 'disallow', abstention_threshold: 0.5 } as FragmentConfig;
    const res = decodeBoundaryRecord(record, 0, scores, tasks, config, 0.5);
    expect(res.entities).toEqual({
      // the library resolves overlaps first, then drops spans that touch the prefix: [2, 4) outscored "ada"
      // ([3, 4)) and was dropped after, so "ada" is gone too
      person: [{ text: 'bob', score: 0.8, start: 108, end: 111 }],
      verb: [],
      city: [],
    });
  });
});
