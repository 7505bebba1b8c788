import { servicesFromEnv } from '../../src/adapters/aws';

describe('servicesFromEnv', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('needs only SIFT_TABLE (the authorizer and event functions get no bucket or queue)', async () => {
    delete process.env.SIFT_BUCKET;
    delete process.env.SIFT_QUEUE_URL;
    process.env.SIFT_TABLE = 'sift-records';
    const svc = servicesFromEnv('dynamodb');
    expect(svc.records.table).toBe('sift-records');
    expect(() => svc.blobs.list('x')).toThrow(/SIFT_BUCKET is not set/);
    expect(() => svc.queue.send({ type: 'dataset.process', team_id: 't', dataset_name: 'd', version: 1 })).toThrow(
      /SIFT_QUEUE_URL is not set/,
    );
  });

  it('refuses to start without a table', () => {
    delete process.env.SIFT_TABLE;
    expect(() => servicesFromEnv('dynamodb')).toThrow(/SIFT_TABLE/);
  });
});
