/** Stage configuration from CDK context: the documented overrides and their errors. */
import { App } from 'aws-cdk-lib';
import { loadStageConfig } from '../../lib/config';

const load = (context: Record<string, unknown>) => loadStageConfig(new App({ context }).node);

describe('usagePlans context', () => {
  it('replaces the plans it names and keeps the others', () => {
    const base = load({});
    const c = load({ usagePlans: '{"pro":{"rateLimit":250,"burstLimit":500}}' });
    expect(c.usagePlans.pro).toEqual({ rateLimit: 250, burstLimit: 500 });
    expect(c.usagePlans.free).toEqual(base.usagePlans.free);
  });

  it('refuses unknown plans, bad numbers and bad JSON, naming the problem', () => {
    expect(() => load({ usagePlans: '{"gold":{"rateLimit":1,"burstLimit":1}}' })).toThrow('unknown plan gold');
    expect(() => load({ usagePlans: '{"pro":{"rateLimit":0,"burstLimit":5}}' })).toThrow(
      'usagePlans.pro needs a positive rateLimit',
    );
    expect(() => load({ usagePlans: '{"pro":{"rateLimit":5,"burstLimit":2.5}}' })).toThrow(
      'positive integer burstLimit',
    );
    expect(() => load({ usagePlans: '{pro' })).toThrow('context usagePlans must be JSON');
  });
});

describe('stages', () => {
  it('defaults to dev and refuses unknown stages', () => {
    expect(load({}).stage).toBe('dev');
    expect(() => load({ stage: 'qa' })).toThrow('context stage must be dev, staging or prod');
  });
});
