/**
 * What the training container (containers/training/sift_trainer) leaves in /opt/ml/model and
 * /opt/ml/checkpoints for an encoder LoRA job, laid out on disk so a test can pack it the way
 * SageMaker does (/opt/ml/model as one model.tar.gz, "How Amazon SageMaker Processes Training Output",
 * https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-output.html). The file
 * names are read from the trainer's own source, so renaming an output there without the service
 * following fails the rehearsal instead of the first deployed job. Not modelled: uncompressed output
 * (OutputDataConfig.CompressionType NONE; Sift asks for the default, GZIP).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { create as createTar } from 'tar';
import { REPO_ROOT } from '../../src/paths';

const TRAINER = join(REPO_ROOT, 'containers/training/sift_trainer');

async function matches(file: string, pattern: RegExp): Promise<string[]> {
  const text = await readFile(join(TRAINER, file), 'utf8');
  return [...text.matchAll(pattern)].map((m) => m[1]!);
}

/** The encoder model files the trainer writes: its manifest's `files` map, the ONNX fragments, its own JSON files. */
export async function trainerModelFiles(): Promise<string[]> {
  const train = await readFile(join(TRAINER, 'job', 'train.py'), 'utf8');
  const filesBlock = /"files": \{([^}]*)\}/.exec(train)?.[1] ?? '';
  const manifestFiles = [...filesBlock.matchAll(/"\w+": "([^"]+)"/g)].map((m) => m[1]!).filter((f) => !f.endsWith('/'));
  const written = await matches('job/train.py', /paths\.model_dir \/ "([^"]+)"/g);
  const onnx = (await matches('export/export_onnx.py', /onnx_dir \/ "([^"]+)"/g)).map((f) => `onnx/${f}`);
  const all = [...new Set([...manifestFiles, ...written, ...onnx])].sort();
  // the engine cannot load a model without these: if the trainer stops naming them, say so here
  // (src/encoder/engine.ts and runtime.ts load these; training.validate reads validation.jsonl)
  const needed = [
    'manifest.json',
    'metrics.json',
    'validation.jsonl',
    'config.json',
    'tokenizer.json',
    'onnx/gliner2_config.json',
  ];
  for (const fragment of ['encoder', 'span_rep', 'count_pred', 'count_embed', 'classifier'])
    needed.push(`onnx/${fragment}.onnx`);
  for (const file of needed) {
    if (!all.includes(file))
      throw new Error(
        `the trainer no longer writes ${file} (containers/training/sift_trainer): update the service and this rehearsal`,
      );
  }
  return all;
}

/** The trainer's index of its run's checkpoints (job/resume.py INDEX), read from its source. */
export const CHECKPOINT_INDEX = /^INDEX = "([^"]+)"/m.exec(
  readFileSync(join(TRAINER, 'job', 'resume.py'), 'utf8'),
)![1]!;

/**
 * What an attempt SageMaker interrupted (a spot reclaim) left synced in /opt/ml/checkpoints: the checkpoint
 * it was writing under its temporary name (job/resume.py PARTIAL_PREFIX), already with its
 * sift_checkpoint.json, and its index at the time. The restarted attempt resumes and writes its own.
 */
export async function writeInterruptedAttempt(root: string): Promise<{ dir: string; partialId: string }> {
  const prefix = /^PARTIAL_PREFIX = "([^"]+)"/m.exec(readFileSync(join(TRAINER, 'job', 'resume.py'), 'utf8'))![1]!;
  const partial = join(root, `${prefix}checkpoint-epoch-2`);
  const partialId = randomUUID();
  await mkdir(partial, { recursive: true });
  await writeFile(join(partial, 'adapter_config.json'), '{"r":16}');
  await writeFile(
    join(partial, 'sift_checkpoint.json'),
    JSON.stringify({ id: partialId, name: 'checkpoint-epoch-2', step: 8 }),
  );
  await writeFile(
    join(root, CHECKPOINT_INDEX),
    JSON.stringify({ format: 1, checkpoints: [{ name: 'checkpoint-epoch-1' }] }),
  );
  return { dir: root, partialId };
}

/** The steps the stand-in trainer trained: its checkpoints are at 4, 8 and (final) 12. */
export const TRAINED_STEPS = 12;

export interface TrainerOutput {
  modelDir: string;
  checkpointsDir: string;
  /** Relative path → bytes, for every file in the model directory. */
  modelFiles: Map<string, Buffer>;
  metrics: Record<string, unknown>;
  /** The checkpoint directories with their sift_checkpoint.json. */
  checkpoints: {
    dir: string;
    meta: {
      id: string;
      name: string;
      step: number;
      epoch: number;
      metrics: Record<string, number>;
      is_best: boolean;
      is_final: boolean;
      created_at: string;
    };
  }[];
}

/**
 * Writes a finished job's /opt/ml/model and /opt/ml/checkpoints under `root`. `extraMetrics` go into
 * metrics.json beside the trainer's validation scores (e.g. `baseline_f1`, which learningWarnings reads).
 */
export async function writeTrainerOutput(
  root: string,
  opts: { validationRows: unknown[]; weightsBytes?: number; extraMetrics?: Record<string, unknown> },
): Promise<TrainerOutput> {
  const modelDir = join(root, 'model');
  const checkpointsDir = join(root, 'checkpoints');
  const metrics = {
    f1: 0.8125,
    precision: 0.8667,
    recall: 0.7647,
    per_entity: { person: { f1: 0.9, precision: 0.9, recall: 0.9, support: 10 } },
    support: { rows: opts.validationRows.length },
    evaluated_on: 'validation',
    ...opts.extraMetrics,
  };
  const modelFiles = new Map<string, Buffer>();
  for (const rel of await trainerModelFiles()) {
    let body: Buffer;
    if (rel === 'metrics.json') body = Buffer.from(JSON.stringify(metrics, null, 2));
    else if (rel === 'validation.jsonl')
      body = Buffer.from(`${opts.validationRows.map((r) => JSON.stringify(r)).join('\n')}\n`);
    else if (rel === 'manifest.json') {
      // job/train.py: the optimizer steps trained (the last checkpoint's below) and the epochs
      body = Buffer.from(
        JSON.stringify(
          {
            format: 'sift-model/1',
            family: 'encoder',
            architecture: 'gliner2-span',
            training_type: 'lora',
            metrics,
            steps: TRAINED_STEPS,
            epochs: 2,
          },
          null,
          2,
        ),
      );
    } else if (rel.endsWith('.json')) body = Buffer.from(JSON.stringify({ file: rel }));
    // the weights are the big file: bigger than a stream chunk, so unpacking must stream it
    else body = rel === 'model.safetensors' ? randomBytes(opts.weightsBytes ?? 3 * 1024 * 1024) : randomBytes(2048);
    modelFiles.set(rel, body);
  }
  // a LoRA job also keeps its PEFT adapter (encoder/training.py: paths.model_dir / "adapter")
  modelFiles.set('adapter/adapter_config.json', Buffer.from('{"r":16}'));
  modelFiles.set('adapter/adapter_model.safetensors', randomBytes(4096));
  for (const [rel, body] of modelFiles) {
    await mkdir(dirname(join(modelDir, rel)), { recursive: true });
    await writeFile(join(modelDir, rel), body);
  }

  // encoder/training.py SiftExtractorTrainer._save_checkpoint: one directory per epoch, then `final`
  const checkpoints: TrainerOutput['checkpoints'] = [];
  const names = ['checkpoint-epoch-1', 'checkpoint-epoch-2', 'final'];
  for (const [i, name] of names.entries()) {
    const dir = join(checkpointsDir, name);
    const f1 = [0.61, 0.79, 0.79][i]!;
    const meta = {
      id: randomUUID(),
      name,
      family: 'encoder',
      step: ((i + 1) * TRAINED_STEPS) / names.length,
      epoch: Math.min(i + 1, 2),
      metrics: { f1, precision: f1 + 0.05, recall: f1 - 0.05, eval_loss: 1.5 - i * 0.3 },
      is_best: i === 1,
      is_final: name === 'final',
      kind: 'adapter',
      base_model_path: '/opt/ml/input/data/model',
      created_at: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString().replace(/\.\d+Z$/, 'Z'),
      path: `/opt/ml/checkpoints/${name}`,
    };
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'adapter_config.json'), '{"r":16}');
    await writeFile(join(dir, 'adapter_model.safetensors'), randomBytes(1024));
    await writeFile(join(dir, 'sift_checkpoint.json'), JSON.stringify(meta, null, 2));
    checkpoints.push({ dir, meta });
  }
  // job/resume.py: the index of the run's checkpoints, beside them
  const index = {
    format: 1,
    checkpoints: checkpoints.map((c) => ({ id: c.meta.id, name: c.meta.name, step: c.meta.step })),
  };
  await writeFile(join(checkpointsDir, CHECKPOINT_INDEX), JSON.stringify(index, null, 2));
  return { modelDir, checkpointsDir, modelFiles, metrics, checkpoints };
}

/**
 * model.tar.gz as SageMaker uploads it: the contents of /opt/ml/model (not the directory itself),
 * gzip-compressed, to `<S3OutputPath>/<TrainingJobName>/output/model.tar.gz`
 * (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-output.html).
 * `./`-prefixed entries (as `tar -C /opt/ml/model .` writes them) or bare names: the unpacking
 * must take either.
 */
export async function packModelDir(modelDir: string, file: string, entries: 'dot' | 'names' = 'dot'): Promise<void> {
  await createTar(
    { gzip: true, file, cwd: modelDir, portable: true },
    entries === 'dot' ? ['.'] : await readdir(modelDir),
  );
}
