export type ModelType = 'encoder' | 'decoder';
export type EncoderTask = 'ner' | 'classification' | 'structures' | 'relations';
export type ModelTask = EncoderTask | 'generate';

export interface BaseModel {
  id: string;
  type: ModelType;
  description: string;
  languages: string[];
  parameters: string;
  tasks: ModelTask[];
  supports_training: boolean;
  training_types: ('lora' | 'full')[];
  training_algorithms: ('sft' | 'dpo' | 'grpo')[];
  default_hyperparameters: { nr_epochs: number; learning_rate: number };
  max_input_tokens: number;
  /** Where the entry comes from: this fixed list, or an operator's import under its own name (modelRegistry.ts). */
  source?: 'catalog' | 'imported';
  /** An imported model's served architecture (`gliner2-span`) and backbone `model_type` (`bert`, `deberta-v2`). */
  architecture?: string;
  backbone?: string;
  /** An imported model's exact size: parameters and bytes in the model store. */
  parameter_count?: number;
  size_bytes?: number;
  /** An imported model private to one team. */
  team_id?: string;
}

export const ENCODER_TASKS: readonly ModelTask[] = ['ner', 'classification', 'structures', 'relations'];

const encoder = (id: string, description: string, languages: string[], parameters: string, lr: number): BaseModel => ({
  id,
  type: 'encoder',
  description,
  languages,
  parameters,
  tasks: [...ENCODER_TASKS],
  supports_training: true,
  training_types: ['lora', 'full'],
  training_algorithms: ['sft'],
  default_hyperparameters: { nr_epochs: 10, learning_rate: lr },
  max_input_tokens: 2048,
});

/** docs/reference/decisions.md#encoder-catalog plus the offline mini model and the local decoder. */
export const CATALOG: readonly BaseModel[] = [
  encoder('fastino/gliner2-base-v1', 'English, general purpose (default starting point)', ['en'], '205M', 5e-5),
  encoder('fastino/gliner2-large-v1', 'English, higher accuracy', ['en'], '340M', 3e-5),
  encoder('fastino/gliner2-multi-v1', 'Multilingual', ['multi'], '280M', 5e-5),
  encoder('fastino/gliner2-multi-large-v1', 'Multilingual, higher accuracy', ['multi'], '560M', 3e-5),
  encoder('sift/gliner2-mini-v1', 'English, small and fast; built offline on a MiniLM backbone', ['en'], '23M', 1e-4),
  {
    id: 'HuggingFaceTB/SmolLM2-135M-Instruct',
    type: 'decoder',
    description: 'Small instruction-tuned decoder (runs on CPU)',
    languages: ['en'],
    parameters: '135M',
    tasks: ['generate'],
    supports_training: true,
    training_types: ['lora'],
    training_algorithms: ['sft', 'dpo', 'grpo'],
    default_hyperparameters: { nr_epochs: 3, learning_rate: 2e-4 },
    max_input_tokens: 8192,
  },
];

export const findBaseModel = (id: string): BaseModel | undefined => CATALOG.find((m) => m.id === id);

/**
 * LoRA on an encoder trains only low-rank updates and needs a higher rate than full fine-tuning; a
 * base model's `learning_rate` is its full fine-tuning rate. How much higher depends on how often the
 * run sees each row: on 100 rows (21 epochs) 1e-3 over-fits and 3e-4 is best; on 300 rows (8 epochs)
 * and 1,000 (3 epochs) 1e-3 is better on every set measured (docs/experiments/training.md "Defaults that train
 * well on small data"). The same rule sits in the trainer's schedule.py for jobs run without the API.
 */
export const ENCODER_LORA_LEARNING_RATE = 3e-4;
export const ENCODER_LORA_LEARNING_RATE_MANY_ROWS = 1e-3;
/** training rows (all the job's datasets) from which LoRA on an encoder defaults to the larger rate */
export const ENCODER_LORA_MANY_ROWS = 300;

export function defaultLearningRate(model: BaseModel, trainingType: 'lora' | 'full', trainingRows = 0): number {
  if (model.type !== 'encoder' || trainingType !== 'lora') return model.default_hyperparameters.learning_rate;
  return trainingRows >= ENCODER_LORA_MANY_ROWS ? ENCODER_LORA_LEARNING_RATE_MANY_ROWS : ENCODER_LORA_LEARNING_RATE;
}
