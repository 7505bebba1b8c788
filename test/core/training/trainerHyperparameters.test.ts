import { trainerHyperparameters } from '../../../src/core/training/hyperparameters';
import type { TrainingJob } from '../../../src/core/trainingJobs';
import { TestStack, jsonl } from '../../helpers/localStack';

/** What a job created through the API tells the trainer: defaults it may size itself, explicit values always. */
let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
  const ner = jsonl([
    {
      text: 'Tim Cook leads Apple.',
      entities: [
        ['Tim Cook', 'person'],
        ['Apple', 'company'],
      ],
    },
  ]);
  const chat = jsonl([
    {
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello' },
      ],
    },
  ]);
  expect((await stack.uploadDataset('ner-set', ner)).status).toBe('ready');
  expect((await stack.uploadDataset('chat-set', chat)).status).toBe('ready');
  // 300 rows: the measured threshold of the larger LoRA rate (d6c386b), written out, not read from the catalog
  const many = Array.from({ length: 300 }, (_, i) => ({
    text: `Row ${i} names Apple.`,
    entities: [['Apple', 'company']],
  }));
  expect((await stack.uploadDataset('ner-many', jsonl(many))).status).toBe('ready');
});
afterAll(async () => stack.stop());

const create = (body: Record<string, unknown>) => stack.call('POST', '/core/training-jobs', { body });

describe('trainer hyperparameters of a job', () => {
  it('lets the trainer size the epochs when the request names none; explicit hyperparameters always reach it', async () => {
    const get = async (body: Record<string, unknown>) => {
      const res = await create({
        model_name: 'hp',
        base_model: 'sift/gliner2-mini-v1',
        datasets: [{ name: 'ner-set' }],
        ...body,
      });
      expect(res.status).toBe(201);
      return (await stack.call('GET', `/core/training-jobs/${res.body.id}`)).body as TrainingJob;
    };
    const auto = await get({});
    expect(auto).toMatchObject({ training_type: 'lora', learning_rate: 3e-4, epochs_from_data: true });
    const autoHp = trainerHyperparameters(auto, '/base');
    expect(autoHp).not.toHaveProperty('nr_epochs');
    expect(autoHp).toMatchObject({ learning_rate: '0.0003', training_type: 'lora' });

    const full = await get({ training_type: 'full' });
    expect(full.learning_rate).toBe(1e-4); // the mini model's full fine-tuning rate from the catalog
    expect(full.epochs_from_data).toBe(true);

    const explicit = await get({ training_type: 'full', nr_epochs: 4, learning_rate: 2e-4, seed: 7 });
    expect(explicit).toMatchObject({ nr_epochs: 4, learning_rate: 2e-4, seed: 7 });
    expect(explicit.epochs_from_data).toBeUndefined();
    expect(trainerHyperparameters(explicit, '/base')).toMatchObject({
      nr_epochs: '4',
      learning_rate: '0.0002',
      seed: '7',
    });
    expect(trainerHyperparameters(auto, '/base').seed).toBe('42');

    // a LoRA job on many rows runs few epochs and gets the larger rate; an explicit one still wins
    const many = await get({ datasets: [{ name: 'ner-many' }] });
    expect(many).toMatchObject({ training_type: 'lora', learning_rate: 1e-3, epochs_from_data: true });
    expect(trainerHyperparameters(many, '/base')).toMatchObject({ learning_rate: '0.001' });
    expect((await get({ datasets: [{ name: 'ner-many' }], learning_rate: 2e-4 })).learning_rate).toBe(2e-4);
    expect((await get({ datasets: [{ name: 'ner-many' }], training_type: 'full' })).learning_rate).toBe(1e-4);

    // decoders keep their catalog epochs: their trainer does not size them
    const chat = await create({
      model_name: 'chat',
      base_model: 'HuggingFaceTB/SmolLM2-135M-Instruct',
      datasets: [{ name: 'chat-set' }],
    });
    const decoder = (await stack.call('GET', `/core/training-jobs/${chat.body.id}`)).body as TrainingJob;
    expect(decoder).toMatchObject({ nr_epochs: 3, learning_rate: 2e-4 });
    expect(trainerHyperparameters(decoder, '/base')).toMatchObject({ nr_epochs: '3' });
  });
});
