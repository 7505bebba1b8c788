/**
 * The encoder's execution provider: SIFT_ENCODER_EXECUTION_PROVIDER parsing, and `cuda` really
 * falling back to CPU (with a warning naming why) where onnxruntime can't load the CUDA provider —
 * as on this machine, whose onnxruntime-node install skipped the CUDA libraries.
 *
 * What this does not prove (#26 item 7): which of the two cuda tests runs is picked by this
 * machine's node_modules (CUDA_LIB present or not), not by the test. Here only the fallback runs.
 * The other one has never run on a GPU, and where it runs it checks only the log line and that an
 * identity graph answers — not that onnxruntime actually placed the session on the CUDA provider.
 * That stays unverified until it runs on a machine with a GPU and the CUDA provider installed.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  EXECUTION_PROVIDER_ENV,
  executionProviderFromEnv,
  isProviderUnavailable,
  withProviderFallback,
  type ExecutionProvider,
} from '../../src/encoder/executionProvider';
import { createSessions } from '../../src/encoder/sessions';
import { identityModel } from '../helpers/tinyOnnx';

const CUDA_LIB = join(
  'node_modules',
  'onnxruntime-node',
  'bin',
  'napi-v6',
  'linux',
  'x64',
  'libonnxruntime_providers_cuda.so',
);
const cudaInstalled = existsSync(CUDA_LIB);
let dir: string;
let model: string;

interface Line {
  level: 'info' | 'warn';
  message: string;
  extra: Record<string, unknown>;
}
const recorder = () => {
  const lines: Line[] = [];
  return {
    lines,
    logger: {
      info: (message: string, extra: Record<string, unknown> = {}) => lines.push({ level: 'info', message, extra }),
      warn: (message: string, extra: Record<string, unknown> = {}) => lines.push({ level: 'warn', message, extra }),
    },
  };
};

async function identityWorks(sessions: Awaited<ReturnType<typeof createSessions>>) {
  const out = await sessions.run('encoder', { x: { type: 'float32', data: Float32Array.from([1.5, -2]), dims: [2] } });
  expect(Array.from(out.y!.data)).toEqual([1.5, -2]);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-ep-'));
  model = join(dir, 'identity.onnx');
  await writeFile(model, identityModel());
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe(`${EXECUTION_PROVIDER_ENV}`, () => {
  it('defaults to cpu, accepts cpu and cuda in any case, and names the variable when it is anything else', () => {
    expect(executionProviderFromEnv({})).toBe('cpu');
    expect(executionProviderFromEnv({ [EXECUTION_PROVIDER_ENV]: '' })).toBe('cpu');
    expect(executionProviderFromEnv({ [EXECUTION_PROVIDER_ENV]: ' CUDA ' })).toBe('cuda');
    expect(executionProviderFromEnv({ [EXECUTION_PROVIDER_ENV]: 'cpu' })).toBe('cpu');
    expect(() => executionProviderFromEnv({ [EXECUTION_PROVIDER_ENV]: 'gpu' })).toThrow(
      "SIFT_ENCODER_EXECUTION_PROVIDER must be one of cpu, cuda; got 'gpu'",
    );
  });
});

describe('session creation', () => {
  it('cpu: runs on CPU and says so, without a warning', async () => {
    const log = recorder();
    const sessions = await createSessions({ encoder: model }, { executionProvider: 'cpu', logger: log.logger });
    try {
      await identityWorks(sessions);
    } finally {
      await sessions.release();
    }
    expect(log.lines).toEqual([
      {
        level: 'info',
        message: 'encoder sessions created',
        extra: expect.objectContaining({ execution_provider: 'cpu', requested: 'cpu' }),
      },
    ]);
  });

  (cudaInstalled ? it.skip : it)(
    'cuda from the environment, without the CUDA provider: warns why, then works on CPU',
    async () => {
      const log = recorder();
      const saved = process.env[EXECUTION_PROVIDER_ENV];
      process.env[EXECUTION_PROVIDER_ENV] = 'cuda';
      let sessions: Awaited<ReturnType<typeof createSessions>>;
      try {
        sessions = await createSessions({ encoder: model }, { logger: log.logger });
      } finally {
        if (saved === undefined) delete process.env[EXECUTION_PROVIDER_ENV];
        else process.env[EXECUTION_PROVIDER_ENV] = saved;
      }
      try {
        await identityWorks(sessions);
      } finally {
        await sessions.release();
      }
      expect(log.lines.map((l) => [l.level, l.extra.execution_provider])).toEqual([
        ['warn', 'cpu'],
        ['info', 'cpu'],
      ]);
      expect(log.lines[0]!.message).toBe(
        'the cuda execution provider could not be loaded; encoder sessions run on CPU',
      );
      expect(log.lines[0]!.extra).toMatchObject({ requested: 'cuda', model_dir: expect.any(String) });
      expect(String(log.lines[0]!.extra.reason)).toMatch(/Failed to load shared library|AppendExecutionProvider/);
    },
  );

  (cudaInstalled ? it : it.skip)(
    'cuda with the CUDA provider installed: says which provider it ended up on',
    async () => {
      const log = recorder();
      const sessions = await createSessions({ encoder: model }, { executionProvider: 'cuda', logger: log.logger });
      try {
        await identityWorks(sessions);
      } finally {
        await sessions.release();
      }
      expect(log.lines).toEqual([
        {
          level: 'info',
          message: 'encoder sessions created',
          extra: expect.objectContaining({ execution_provider: 'cuda', requested: 'cuda' }),
        },
      ]);
    },
  );

  it('a broken model is an error, not a reason to fall back', async () => {
    const broken = join(dir, 'broken.onnx');
    await writeFile(broken, Buffer.from('not an onnx model'));
    const log = recorder();
    await expect(
      createSessions({ encoder: broken }, { executionProvider: 'cpu', logger: log.logger }),
    ).rejects.toThrow();
    expect(log.lines).toEqual([]);
    expect(isProviderUnavailable(new Error('Load model from broken.onnx failed: Protobuf parsing failed.'))).toBe(
      false,
    );
    // asked for cuda, a model error is rethrown as it is: no second try on CPU, nothing logged
    const tried: ExecutionProvider[] = [];
    const create = async (p: ExecutionProvider) => {
      tried.push(p);
      throw new Error('Load model from broken.onnx failed: Protobuf parsing failed.');
    };
    await expect(withProviderFallback('cuda', create, log.logger)).rejects.toThrow('Protobuf parsing failed');
    expect(tried).toEqual(['cuda']);
    expect(log.lines).toEqual([]);
  });
});
