/**
 * The request rules of the AWS calls Sift makes that no emulator here can serve (SageMaker, Step
 * Functions), as the API references state them. The rehearsal's stand-ins check every request
 * against this one table, so a request the real service would refuse fails the test here.
 * Not modelled: rules that need the account's state (quotas, an instance type not offered in the
 * region, the role's trust policy) — those are refused only by AWS.
 */

type Rule = { path: string; why: string; ok: (v: unknown, request: Record<string, unknown>) => boolean };

const str = (min: number, max: number, pattern?: RegExp) => (v: unknown) =>
  typeof v === 'string' && v.length >= min && v.length <= max && (!pattern || pattern.test(v));
const int =
  (min: number, max = Number.MAX_SAFE_INTEGER) =>
  (v: unknown) =>
    Number.isInteger(v) && (v as number) >= min && (v as number) <= max;
const oneOf =
  (...values: string[]) =>
  (v: unknown) =>
    typeof v === 'string' && values.includes(v);
const S3_URI = /^(https|s3):\/\/([^/]+)\/?(.*)$/;
const TRAINING_JOB_NAME = /^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$/;
// Any character outside SQS's allowed set for a message body (tab, LF, CR and the XML-safe planes).
// biome-ignore lint/suspicious/noControlCharactersInRegex: the allowed set is SQS's own, which starts at the control characters tab, LF and CR
const NOT_XML_SAFE = /[^\x09\x0A\x0D\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

/** Reads `a.b[].c` (every element of arrays marked `[]`). */
function valuesAt(obj: unknown, path: string): unknown[] {
  let current: unknown[] = [obj];
  for (const part of path.split('.')) {
    const many = part.endsWith('[]');
    const key = many ? part.slice(0, -2) : part;
    current = current.flatMap((o) => {
      const v = o && typeof o === 'object' ? (o as Record<string, unknown>)[key] : undefined;
      return many ? (Array.isArray(v) ? v : [undefined]) : [v];
    });
  }
  return current;
}

export const AWS_REQUEST_RULES: Record<string, Rule[]> = {
  // https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html
  // (with API_Channel.html, API_S3DataSource.html, API_OutputDataConfig.html, API_CheckpointConfig.html,
  //  API_ResourceConfig.html, API_StoppingCondition.html, API_Tag.html)
  'SageMaker.CreateTrainingJob': [
    { path: 'TrainingJobName', why: '1-63 chars, [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}', ok: str(1, 63, TRAINING_JOB_NAME) },
    {
      path: 'AlgorithmSpecification.TrainingInputMode',
      why: 'Pipe | File | FastFile',
      ok: oneOf('Pipe', 'File', 'FastFile'),
    },
    { path: 'AlgorithmSpecification.TrainingImage', why: 'required, at most 255 chars', ok: str(1, 255) },
    {
      path: 'RoleArn',
      why: 'an IAM role ARN, 20-2048 chars',
      ok: str(20, 2048, /^arn:aws[a-z-]*:iam::\d{12}:role\/?[a-zA-Z_0-9+=,.@\-_/]+$/),
    },
    {
      path: 'HyperParameters',
      why: 'a string map of at most 100 entries',
      ok: (v) =>
        !!v &&
        typeof v === 'object' &&
        Object.keys(v).length <= 100 &&
        Object.values(v).every((x) => typeof x === 'string'),
    },
    {
      path: 'HyperParameters',
      why: 'keys at most 256 chars, values at most 2500 chars',
      ok: (v) => Object.entries(v as Record<string, string>).every(([k, x]) => k.length <= 256 && x.length <= 2500),
    },
    {
      path: 'InputDataConfig',
      why: '1-20 channels with distinct names',
      ok: (v) =>
        Array.isArray(v) &&
        v.length >= 1 &&
        v.length <= 20 &&
        new Set(v.map((c: { ChannelName?: string }) => c.ChannelName)).size === v.length,
    },
    {
      path: 'InputDataConfig[].ChannelName',
      why: '1-64 chars of [A-Za-z0-9.\\-_]',
      ok: str(1, 64, /^[A-Za-z0-9.\-_]+$/),
    },
    {
      path: 'InputDataConfig[].DataSource.S3DataSource.S3DataType',
      why: 'S3Prefix | ManifestFile | AugmentedManifestFile | Converse',
      ok: oneOf('S3Prefix', 'ManifestFile', 'AugmentedManifestFile', 'Converse'),
    },
    {
      path: 'InputDataConfig[].DataSource.S3DataSource.S3Uri',
      why: 'an s3:// or https:// URI, at most 1024 chars',
      ok: str(1, 1024, S3_URI),
    },
    {
      path: 'InputDataConfig[].DataSource.S3DataSource.S3DataDistributionType',
      why: 'FullyReplicated | ShardedByS3Key',
      ok: (v) => v === undefined || oneOf('FullyReplicated', 'ShardedByS3Key')(v),
    },
    {
      path: 'InputDataConfig[].InputMode',
      why: 'Pipe | File | FastFile',
      ok: (v) => v === undefined || oneOf('Pipe', 'File', 'FastFile')(v),
    },
    {
      path: 'OutputDataConfig.S3OutputPath',
      why: 'an s3:// or https:// URI, at most 1024 chars',
      ok: str(1, 1024, S3_URI),
    },
    { path: 'CheckpointConfig.S3Uri', why: 'an s3:// or https:// URI, at most 1024 chars', ok: str(1, 1024, S3_URI) },
    { path: 'CheckpointConfig.LocalPath', why: 'at most 4096 chars', ok: (v) => v === undefined || str(1, 4096)(v) },
    { path: 'ResourceConfig.InstanceType', why: 'an ml.* instance type', ok: str(1, 64, /^ml\.[a-z0-9]+\.[a-z0-9]+$/) },
    { path: 'ResourceConfig.InstanceCount', why: 'at least 1', ok: int(1) },
    { path: 'ResourceConfig.VolumeSizeInGB', why: 'at least 1', ok: int(1) },
    // API_StoppingCondition.html: the longest runtime is 28 days; with managed spot training the
    // wait time is required and must be at least the runtime.
    { path: 'StoppingCondition.MaxRuntimeInSeconds', why: '1 to 2419200 (28 days)', ok: int(1, 2_419_200) },
    {
      path: 'StoppingCondition.MaxWaitTimeInSeconds',
      why: 'required with EnableManagedSpotTraining, >= MaxRuntimeInSeconds',
      ok: (v, r) =>
        (r.EnableManagedSpotTraining !== true && v === undefined) ||
        (int(1)(v) &&
          (v as number) >= ((r.StoppingCondition as { MaxRuntimeInSeconds: number }).MaxRuntimeInSeconds ?? 0)),
    },
    { path: 'Tags', why: 'at most 50 tags', ok: (v) => v === undefined || (Array.isArray(v) && v.length <= 50) },
    { path: 'Tags[].Key', why: '1-128 chars', ok: str(1, 128) },
    { path: 'Tags[].Value', why: '0-256 chars', ok: str(0, 256) },
  ],
  // https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StopTrainingJob.html
  'SageMaker.StopTrainingJob': [
    { path: 'TrainingJobName', why: '1-63 chars, [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}', ok: str(1, 63, TRAINING_JOB_NAME) },
  ],
  // https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
  'AmazonSQS.SendMessage': [
    {
      path: 'QueueUrl',
      why: 'the queue URL',
      ok: str(1, 2048, /^https?:\/\/[^/]+\/\d{12}\/[A-Za-z0-9_-]{1,80}(\.fifo)?$/),
    },
    // 256 KiB: the limit every queue has had (newer queues may allow more; Sift's messages are small)
    {
      path: 'MessageBody',
      why: '1 byte to 256 KiB of XML-safe Unicode',
      ok: (v) => typeof v === 'string' && v.length > 0 && Buffer.byteLength(v) <= 262_144 && !NOT_XML_SAFE.test(v),
    },
  ],
  // https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html
  'secretsmanager.GetSecretValue': [{ path: 'SecretId', why: 'a secret name or ARN, 1-2048 chars', ok: str(1, 2048) }],
  // https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html
  'AWSStepFunctions.StartExecution': [
    {
      path: 'stateMachineArn',
      why: 'a state machine ARN, 1-256 chars',
      ok: str(1, 256, /^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$/),
    },
    // the API allows 1-80 chars; names with other than [A-Za-z0-9_-] break CloudWatch logging (same page)
    { path: 'name', why: '1-80 chars of [A-Za-z0-9_-]', ok: str(1, 80, /^[A-Za-z0-9_-]+$/) },
    {
      path: 'input',
      why: 'a JSON text of at most 256 KiB',
      ok: (v) => typeof v === 'string' && Buffer.byteLength(v) <= 262_144 && isJson(v),
    },
  ],
};

function isJson(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}

/** Every rule of `operation` the request breaks, as `path: why` lines (empty when it is valid). */
export function violations(
  operation: keyof typeof AWS_REQUEST_RULES | string,
  request: Record<string, unknown>,
): string[] {
  const rules = AWS_REQUEST_RULES[operation];
  if (!rules) return [`no rules for ${operation}: add them to test/helpers/awsRequestRules.ts before stubbing it`];
  const out: string[] = [];
  for (const rule of rules) {
    for (const v of valuesAt(request, rule.path))
      if (!rule.ok(v, request)) out.push(`${rule.path}: ${rule.why} (got ${JSON.stringify(v)?.slice(0, 120)})`);
  }
  return out;
}
