import { learningWarnings } from '../../../src/core/trainingJobs';

const headline = (f1: number) => ({ f1, precision: f1, recall: f1 });

describe('learningWarnings: a job that does not beat its base model says so', () => {
  it('warns when the held-out F1 is no better than the base model on the same rows', () => {
    const [w] = learningWarnings({ baseline_f1: 0.31, evaluated_on: 'validation' }, headline(0.31));
    expect(w).toMatch(/validation F1 0\.3100 does not beat the base model's 0\.3100/);
    expect(learningWarnings({ baseline_f1: 0.4, evaluated_on: 'validation' }, headline(0.007))).toHaveLength(1);
  });

  it('is silent when the model beats its base', () => {
    expect(learningWarnings({ baseline_f1: 0.116, evaluated_on: 'validation' }, headline(0.483))).toEqual([]);
  });

  it("passes on the trainer's own warnings for jobs without an F1 baseline (preference and RL jobs)", () => {
    const grpo =
      'the reward never varied between generations (mean reward 0.000 at every step): GRPO had no learning signal.';
    expect(learningWarnings({ train_loss: 0, warnings: [grpo, 7] }, null)).toEqual([grpo]);
    // an encoder's warning is decided here from the served F1, not copied from the trainer's
    expect(
      learningWarnings({ baseline_f1: 0.2, evaluated_on: 'validation', warnings: ['trainer says no'] }, headline(0.5)),
    ).toEqual([]);
  });

  it('does not judge without a baseline, without held-out metrics, or on training-set fit', () => {
    expect(learningWarnings({ f1: 0.2 }, headline(0.2))).toEqual([]);
    expect(learningWarnings({ baseline_f1: 0.5 }, null)).toEqual([]);
    expect(learningWarnings({ baseline_f1: 0.5, evaluated_on: 'train' }, headline(0.1))).toEqual([]);
    expect(learningWarnings(null, headline(0.1))).toEqual([]);
  });

  it('keeps what the trainer could not do with the data (a one-label classification head it left out), whatever the F1', () => {
    const data =
      "the 'label' column holds only 'normal' across the dataset: classification needs at least two distinct labels to choose between, so the classification head was not trained; the other heads (entities) were";
    expect(
      learningWarnings({ baseline_f1: 0.2, evaluated_on: 'validation', data_warnings: [data] }, headline(0.5)),
    ).toEqual([data]);
    const both = learningWarnings(
      { baseline_f1: 0.5, evaluated_on: 'validation', data_warnings: [data] },
      headline(0.4),
    );
    expect(both[0]).toBe(data);
    expect(both[1]).toMatch(/does not beat the base model/);
    expect(learningWarnings({ baseline_f1: 0.2, evaluated_on: 'train', data_warnings: [data] }, headline(0.1))).toEqual(
      [data],
    );
    expect(learningWarnings({ data_warnings: [data] }, null)).toEqual([data]);
  });
});
