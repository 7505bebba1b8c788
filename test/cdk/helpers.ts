/**
 * Builds the whole Sift app the way `bin/app.ts` does (same cdk.json context,
 * same nag plugin), without bundling Lambda code, once per test file.
 */
import { App, type Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadStageConfig, type StageConfig } from '../../lib/config';
import { REPO_ROOT } from '../../lib/paths';
import { buildSift, type SiftStacks } from '../../lib/sift-app';

export interface Built {
  readonly app: App;
  readonly config: StageConfig;
  readonly stacks: SiftStacks;
  readonly outdir: string;
  template(stack: Stack): Template;
}

const cdkJson = JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> };

/**
 * `nag: true` registers cdk-nag and keeps CDK's built-in CloudFormation rule
 * validation (as `cdk synth` does); other tests skip that validation (~7 s per app).
 */
export function buildApp(context: Record<string, unknown> = {}, options: { nag?: boolean } = {}): Built {
  const outdir = mkdtempSync(join(tmpdir(), 'sift-cdk-'));
  const app = new App({
    outdir,
    context: {
      ...cdkJson.context,
      'aws:cdk:bundling-stacks': [],
      ...(options.nag ? {} : { '@aws-cdk/core:validateAgainstDefaultRules': false }),
      ...context,
    },
  });
  const config = loadStageConfig(app.node);
  const stacks = buildSift(app, config, { nag: options.nag ?? false });
  const cache = new Map<Stack, Template>();
  return {
    app,
    config,
    stacks,
    outdir,
    template(stack: Stack): Template {
      let t = cache.get(stack);
      if (!t) {
        t = Template.fromStack(stack);
        cache.set(stack, t);
      }
      return t;
    },
  };
}

export interface NagViolation {
  readonly rule: string;
  readonly paths: string[];
}

/** Synthesizes with cdk-nag; returns the violations from the validation report (empty when clean). */
export function nagViolations(built: Built): NagViolation[] {
  try {
    built.app.synth();
  } catch (e) {
    if (!/Validation ?failed/i.test(String(e))) throw e;
  }
  const report = readdirSync(built.outdir).find((f) => f.endsWith('validation-report.json'));
  if (!report) return [];
  const json = JSON.parse(readFileSync(join(built.outdir, report), 'utf8')) as {
    pluginReports: Array<{
      violations: Array<{ ruleName: string; violatingConstructs?: Array<{ constructPath?: string }> }>;
    }>;
  };
  return json.pluginReports.flatMap((r) =>
    r.violations.map((v) => ({
      rule: v.ruleName,
      paths: (v.violatingConstructs ?? []).map((x) => x.constructPath ?? '?'),
    })),
  );
}

type Resources = Record<string, { Type: string; Properties?: Record<string, unknown> }>;

export function resourcesOfType(template: Template, type: string): Resources {
  return template.findResources(type) as Resources;
}

/** All IAM policy statements of a template (inline policies and AWS::IAM::Policy). */
export function policyStatements(
  template: Template,
): Array<{ Effect: string; Action: unknown; Resource: unknown; Condition?: unknown; logicalId: string }> {
  const out: Array<{ Effect: string; Action: unknown; Resource: unknown; Condition?: unknown; logicalId: string }> = [];
  for (const [id, res] of Object.entries(resourcesOfType(template, 'AWS::IAM::Policy'))) {
    const doc = (res.Properties?.PolicyDocument ?? {}) as { Statement?: Array<Record<string, unknown>> };
    for (const s of doc.Statement ?? [])
      out.push({ ...(s as { Effect: string; Action: unknown; Resource: unknown }), logicalId: id });
  }
  for (const [id, res] of Object.entries(resourcesOfType(template, 'AWS::IAM::Role'))) {
    const policies = (res.Properties?.Policies ?? []) as Array<{
      PolicyDocument: { Statement: Array<Record<string, unknown>> };
    }>;
    for (const p of policies)
      for (const s of p.PolicyDocument.Statement)
        out.push({ ...(s as { Effect: string; Action: unknown; Resource: unknown }), logicalId: id });
  }
  return out;
}

export const asArray = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
