/**
 * The rules table the AWS stand-ins check requests against (test/helpers/awsRequestRules.ts) must be
 * able to say no: a request each service would refuse is refused here, naming the rule.
 */
import { violations } from '../helpers/awsRequestRules';

const valid = {
  TrainingJobName: 'sift-prod-5b0c3c1e-1111-4a4a-8a8a-000000000001',
  AlgorithmSpecification: {
    TrainingImage: '123456789012.dkr.ecr.us-east-1.amazonaws.com/sift-training:1',
    TrainingInputMode: 'File',
  },
  RoleArn: 'arn:aws:iam::123456789012:role/sift-training',
  HyperParameters: { base_model_path: '/opt/ml/input/data/model', nr_epochs: '3' },
  InputDataConfig: [
    {
      ChannelName: 'train',
      DataSource: {
        S3DataSource: {
          S3DataType: 'S3Prefix',
          S3Uri: 's3://b/jobs/t/j/input/train/',
          S3DataDistributionType: 'FullyReplicated',
        },
      },
      InputMode: 'File',
    },
  ],
  OutputDataConfig: { S3OutputPath: 's3://b/jobs/t/j/sagemaker/output/' },
  CheckpointConfig: { S3Uri: 's3://b/jobs/t/j/sagemaker/checkpoints/', LocalPath: '/opt/ml/checkpoints' },
  ResourceConfig: { InstanceCount: 1, InstanceType: 'ml.g5.xlarge', VolumeSizeInGB: 100 },
  EnableManagedSpotTraining: true,
  StoppingCondition: { MaxRuntimeInSeconds: 86_400, MaxWaitTimeInSeconds: 172_800 },
  Tags: [{ Key: 'sift:job', Value: 'j' }],
};

it('accepts a valid CreateTrainingJob request', () => {
  expect(violations('SageMaker.CreateTrainingJob', valid)).toEqual([]);
});

it.each([
  ['a name with an underscore', { TrainingJobName: 'sift_prod_1' }, 'TrainingJobName'],
  ['a name of 64 characters', { TrainingJobName: 'a'.repeat(64) }, 'TrainingJobName'],
  ['a name ending in a dash', { TrainingJobName: 'sift-prod-' }, 'TrainingJobName'],
  ['a non-string hyperparameter', { HyperParameters: { nr_epochs: 3 } }, 'HyperParameters'],
  ['a hyperparameter over 2500 characters', { HyperParameters: { rl_config: 'x'.repeat(2501) } }, 'HyperParameters'],
  [
    '101 hyperparameters',
    { HyperParameters: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, 'v'])) },
    'HyperParameters',
  ],
  [
    'a channel name with a space',
    { InputDataConfig: [{ ...valid.InputDataConfig[0], ChannelName: 'my train' }] },
    'InputDataConfig[].ChannelName',
  ],
  [
    'two channels of one name',
    { InputDataConfig: [valid.InputDataConfig[0], valid.InputDataConfig[0]] },
    'InputDataConfig',
  ],
  [
    'a channel URI that is not S3',
    {
      InputDataConfig: [
        { ...valid.InputDataConfig[0], DataSource: { S3DataSource: { S3DataType: 'S3Prefix', S3Uri: '/local/path' } } },
      ],
    },
    'S3Uri',
  ],
  [
    'spot with a wait shorter than the runtime',
    { StoppingCondition: { MaxRuntimeInSeconds: 100, MaxWaitTimeInSeconds: 99 } },
    'MaxWaitTimeInSeconds',
  ],
  ['spot without a wait time', { StoppingCondition: { MaxRuntimeInSeconds: 100 } }, 'MaxWaitTimeInSeconds'],
  [
    'a runtime over 28 days',
    { StoppingCondition: { MaxRuntimeInSeconds: 2_419_201, MaxWaitTimeInSeconds: 2_419_201 } },
    'MaxRuntimeInSeconds',
  ],
  [
    'an instance type without ml.',
    { ResourceConfig: { InstanceCount: 1, InstanceType: 'g5.xlarge', VolumeSizeInGB: 100 } },
    'InstanceType',
  ],
  ['a role that is not a role ARN', { RoleArn: 'sift-training-role-name' }, 'RoleArn'],
])('refuses %s', (_what, change, rule) => {
  const problems = violations('SageMaker.CreateTrainingJob', { ...valid, ...change });
  expect(problems.length).toBeGreaterThan(0);
  expect(problems.join('\n')).toContain(rule);
});

it('checks StartExecution and StopTrainingJob, and refuses an operation it has no rules for', () => {
  const arn = 'arn:aws:states:us-east-1:123456789012:stateMachine:sift-prod-training';
  expect(violations('AWSStepFunctions.StartExecution', { stateMachineArn: arn, name: 'a-b_c', input: '{}' })).toEqual(
    [],
  );
  expect(
    violations('AWSStepFunctions.StartExecution', { stateMachineArn: arn, name: 'has space', input: '{}' }),
  ).toHaveLength(1);
  expect(
    violations('AWSStepFunctions.StartExecution', { stateMachineArn: arn, name: 'x'.repeat(81), input: '{}' }),
  ).toHaveLength(1);
  expect(
    violations('AWSStepFunctions.StartExecution', { stateMachineArn: arn, name: 'n', input: 'not json' }),
  ).toHaveLength(1);
  expect(violations('SageMaker.StopTrainingJob', { TrainingJobName: 'sift-prod-1' })).toEqual([]);
  expect(violations('SageMaker.StopTrainingJob', {})).toHaveLength(1);
  expect(violations('SageMaker.DescribeTrainingJob', {})).toEqual([
    expect.stringContaining('no rules for SageMaker.DescribeTrainingJob'),
  ]);
});
