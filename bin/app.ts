#!/usr/bin/env node
/**
 * Sift CDK app. Stage and overrides come from context:
 *   npx cdk synth                       # dev
 *   npx cdk deploy --all -c stage=prod -c alarmEmail=ops@example.com
 * Stacks are environment-agnostic (no lookups); the account/region come from
 * the credentials `cdk deploy` runs with.
 */
import { App } from 'aws-cdk-lib';
import { loadStageConfig } from '../lib/config';
import { buildSift } from '../lib/sift-app';

const app = new App();
buildSift(app, loadStageConfig(app.node));
app.synth();
