/**
 * Models under their own names (src/core/modelRegistry.ts): the naming rules and refusals of an import, the
 * registry entry a manifest carries, and the lookups that make a registered model a base model like the
 * catalog's — listed, resolved for serving, private to a team when imported so — on the in-memory services.
 */
import { createMemoryServices } from '../../../src/adapters/memory/services';
import { createHotPath } from '../../../src/core/hotPath';
import { baseModelManifestKey } from '../../../src/core/modelLayout';
import {
  checkImportName,
  findModel,
  formatParameters,
  listBaseModels,
  ModelNameError,
  readRegistryEntry,
} from '../../../src/core/modelRegistry';
import { resolveModel } from '../../../src/core/models';

const ID = 'acme/support-ner';
const entry = (extra: Record<string, unknown> = {}) => ({
  source: 'imported',
  architecture: 'gliner2-span',
  backbone: 'bert',
  parameter_count: 22_713_216,
  size_bytes: 91_000_000,
  languages: ['en', 'de'],
  ...extra,
});
const manifest = (id: string, registry: Record<string, unknown> | null = entry()) =>
  JSON.stringify({ format: 'sift-model/1', model_id: id, family: 'encoder', ...(registry ? { registry } : {}) });

describe('import names', () => {
  it('a catalog encoder id provides that model; any other safe <org>/<name> is a model of its own', () => {
    expect(checkImportName('fastino/gliner2-base-v1', '--as')?.id).toBe('fastino/gliner2-base-v1');
    expect(checkImportName(ID, '--as')).toBeUndefined();
    expect(checkImportName('Acme_Labs/ner.v2-final', '--as')).toBeUndefined();
  });

  it.each([
    ['acme', /'acme' is not of the form <org>\/<name>/],
    ['acme/a/b', /not of the form <org>\/<name>/],
    ['../etc/passwd', /not of the form/],
    ['acme/..', /characters a model name cannot hold/],
    ['acme/.hidden', /characters a model name cannot hold/],
    ['acme/my ner', /characters a model name cannot hold/],
    ['acme--x/ner', /characters a model name cannot hold.*without '--'/],
    ['acme/ner%2F', /characters a model name cannot hold/],
    [`acme/${'n'.repeat(97)}`, /too long/],
    ['HuggingFaceTB/SmolLM2-135M-Instruct', /is the catalog's decoder model; only GLiNER2 encoders are imported/],
    ['Fastino/GLiNER2-base-v1', /differs from the catalog's 'fastino\/gliner2-base-v1' only in case/],
  ])('refuses %s, naming the field', (id, why) => {
    let err: unknown;
    try {
      checkImportName(id, '--as');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ModelNameError);
    expect((err as ModelNameError).field).toBe('--as');
    expect((err as Error).message).toMatch(/^--as: /);
    expect((err as Error).message).toMatch(why);
  });
});

describe('registry entries', () => {
  it('reads a well-formed entry and drops what is malformed', () => {
    expect(readRegistryEntry({ registry: entry({ languages: ['en', 'English', 3], team_id: '' }) })).toEqual({
      source: 'imported',
      architecture: 'gliner2-span',
      backbone: 'bert',
      parameter_count: 22_713_216,
      size_bytes: 91_000_000,
      languages: ['en'],
    });
    // an architecture the engine does not serve, or no entry at all, registers nothing
    expect(readRegistryEntry({ registry: entry({ architecture: 'gliner2-token' }) })).toBeUndefined();
    expect(readRegistryEntry({ registry: entry({ architecture: 'gliner2-boundary' }) })?.architecture).toBe(
      'gliner2-boundary',
    );
    expect(readRegistryEntry({ registry: entry({ source: 'catalog' }) })).toBeUndefined();
    expect(readRegistryEntry({ model_id: ID })).toBeUndefined();
    expect(readRegistryEntry(null)).toBeUndefined();
  });

  it('writes sizes as the catalog does', () => {
    expect([formatParameters(22_713_216), formatParameters(205e6), formatParameters(1.2e9)]).toEqual([
      '23M',
      '205M',
      '1.2B',
    ]);
    expect(formatParameters(undefined)).toBe('unknown');
  });
});

describe('the registry in the model store', () => {
  it('an imported model is a base model: found, listed after the catalog with source imported, resolved for serving', async () => {
    const svc = createMemoryServices();
    expect(await findModel(svc, ID, 'team-a')).toBeUndefined();
    await svc.blobs.put(`models/${ID}/onnx/encoder.onnx`, 'x');
    await svc.blobs.put(baseModelManifestKey(ID), manifest(ID));
    // a manifest without a registry entry (a half-written model directory, or weights copied by hand) is no model
    await svc.blobs.put(baseModelManifestKey('acme/unregistered'), manifest('acme/unregistered', null));
    // nor one whose model_id is another's
    await svc.blobs.put(baseModelManifestKey('acme/copied'), manifest(ID));

    const model = await findModel(svc, ID, 'team-a');
    expect(model).toMatchObject({
      id: ID,
      type: 'encoder',
      source: 'imported',
      architecture: 'gliner2-span',
      parameters: '23M',
      languages: ['en', 'de'],
      supports_training: true,
      training_types: ['lora', 'full'],
      default_hyperparameters: { learning_rate: 1e-4 },
    });
    expect(await findModel(svc, 'acme/unregistered', 'team-a')).toBeUndefined();
    expect(await findModel(svc, 'acme/copied', 'team-a')).toBeUndefined();

    const listed = await listBaseModels(svc, {}, 'team-a');
    expect(listed.map((m) => [m.id, m.source])).toEqual([
      ['fastino/gliner2-base-v1', 'catalog'],
      ['fastino/gliner2-large-v1', 'catalog'],
      ['fastino/gliner2-multi-v1', 'catalog'],
      ['fastino/gliner2-multi-large-v1', 'catalog'],
      ['sift/gliner2-mini-v1', 'catalog'],
      ['HuggingFaceTB/SmolLM2-135M-Instruct', 'catalog'],
      [ID, 'imported'],
    ]);
    expect(listed.at(-1)).toMatchObject({
      available: true,
      task_type: 'encoder',
      parameter_count: 22_713_216,
      size_bytes: 91_000_000,
      backbone: 'bert',
      private: false,
    });
    expect((await listBaseModels(svc, { task_type: 'decoder' }, 'team-a')).map((m) => m.id)).toEqual([
      'HuggingFaceTB/SmolLM2-135M-Instruct',
    ]);

    expect(await resolveModel(svc, { team_id: 'team-a' }, ID)).toMatchObject({
      type: 'encoder',
      baseModel: ID,
      prefix: `models/${ID}/`,
      trainingJobId: null,
    });
    await expect(resolveModel(svc, { team_id: 'team-a' }, 'acme/unregistered')).rejects.toMatchObject({
      status: 404,
    });
  });

  it('a private model exists only for its team', async () => {
    const svc = createMemoryServices();
    await svc.blobs.put(baseModelManifestKey(ID), manifest(ID, entry({ team_id: 'team-a' })));
    expect(await findModel(svc, ID, 'team-a')).toMatchObject({ id: ID, team_id: 'team-a' });
    expect(await findModel(svc, ID, 'team-b')).toBeUndefined();
    expect(await findModel(svc, ID, null)).toBeUndefined();
    expect((await listBaseModels(svc, {}, 'team-a')).at(-1)).toMatchObject({ id: ID, private: true });
    expect((await listBaseModels(svc, {}, 'team-a')).at(-1)).not.toHaveProperty('team_id');
    expect((await listBaseModels(svc, {}, 'team-b')).map((m) => m.id)).not.toContain(ID);
    await expect(resolveModel(svc, { team_id: 'team-b' }, ID)).rejects.toMatchObject({ status: 404 });
  });

  it('ids that cannot be model names never reach the store; a long-lived server reads a registration once per TTL', async () => {
    const svc = createMemoryServices();
    svc.hotPath = createHotPath(() => {}, 60_000);
    const asked: string[] = [];
    const head = svc.blobs.head.bind(svc.blobs);
    svc.blobs.head = (key: string) => {
      asked.push(key);
      return head(key);
    };
    for (const id of ['../x', 'a/b/c', 'acme', 'Fastino/GLiNER2-base-v1', 'fastino/gliner2-base-v1'])
      expect((await findModel(svc, id, 'team-a'))?.source).toBeUndefined();
    expect(asked).toEqual([]);
    await svc.blobs.put(baseModelManifestKey(ID), manifest(ID));
    for (let i = 0; i < 3; i++) expect((await findModel(svc, ID, 'team-a'))?.id).toBe(ID);
    expect(asked).toEqual([baseModelManifestKey(ID)]);
    // the registration also stands for the weights (models.ts ensureEncoderWeights asks nothing more)
    expect(svc.hotPath.storedWeights.get(baseModelManifestKey(ID))).toBe(true);
  });
});
