/** The schema an evaluation asks for, and the view of it that restricts what is scored. */
import type { SchemaInput } from '../../extraction/api';
import { CLASSIFICATION_TASK, type DatasetVocabulary, type SchemaView } from './types';

/**
 * The inference schema that asks the engine for every head a dataset version has: entity types,
 * one classification task named `classification` over `label_vocabulary` (`multi_label` when the
 * dataset's rows use `labels`), its structures (a field is `list` when any gold value was an array,
 * see DatasetSummary) and relation types. An empty object means the dataset has no encoder head.
 * Large vocabularies may exceed ENCODER_LIMITS.maxLabels; the caller validates with toEncoderSchema.
 */
export function evaluationSchemaFor(vocabulary: DatasetVocabulary): SchemaInput {
  const schema: SchemaInput = {};
  const entities = vocabulary.entity_types ?? [];
  if (entities.length) schema.entities = [...entities];
  if (vocabulary.label_vocabulary.length) {
    schema.classifications = [
      {
        task: CLASSIFICATION_TASK,
        labels: [...vocabulary.label_vocabulary],
        multi_label: vocabulary.task_types.includes('multi_label_classification'),
      },
    ];
  }
  const structures = Object.entries(vocabulary.structures ?? {}).filter(([, fields]) => Object.keys(fields).length > 0);
  if (structures.length) {
    schema.structures = Object.fromEntries(
      structures.map(([name, fields]) => [
        name,
        { fields: Object.entries(fields).map(([f, spec]) => ({ name: f, dtype: spec.dtype })) },
      ]),
    );
  }
  const relations = vocabulary.relation_types ?? [];
  if (relations.length) schema.relations = [...relations];
  return schema;
}

/** The schema's heads as sets: entity types, the `classification` task, structure fields, relation types. */
export function viewOf(schema: SchemaInput): SchemaView {
  const entities = new Set(
    schema.entities === undefined
      ? []
      : Array.isArray(schema.entities)
        ? schema.entities
        : Object.keys(schema.entities),
  );
  const task = schema.classifications?.find((c) => c.task === CLASSIFICATION_TASK);
  const structures = new Map(
    Object.entries(schema.structures ?? {}).map(([name, s]) => [name, s.fields.map((f) => f.name)]),
  );
  const relations = new Set((schema.relations ?? []).map((r) => (typeof r === 'string' ? r : r.name)));
  return {
    entities,
    ...(task ? { classification: { labels: new Set(task.labels), multi: task.multi_label ?? false } } : {}),
    structures,
    relations,
  };
}
