/**
 * Where every record lives in the records store (one table: pk/sk + the gsi1 index), in one place
 * as storageLayout.ts is for the bucket. Everything a team owns sits under its partition
 * `TEAM#<id>`, so one team's key can never address another team's records.
 */

export const teamPartition = (teamId: string) => `TEAM#${teamId}`;
/** Index sort key of a listing ordered by creation (ids break ties). */
export const byCreation = (createdAt: string, id: string) => `${createdAt}#${id}`;

// The installation and teams
export const installationItem = { pk: 'INSTALL', sk: 'INSTALL' } as const;
export const teamKey = (teamId: string) => ({ pk: teamPartition(teamId), sk: 'TEAM' });
/** Sort key of the team item, which also holds the prepaid balance that usage batches spend. */
export const TEAM_SK = 'TEAM';
/** gsi1 partition listing every team. */
export const TEAMS_INDEX = 'TEAMS';
export const gatewayKeyItem = (teamId: string) => ({ pk: teamPartition(teamId), sk: 'GATEWAYKEY' });

// Keys and sessions: looked up by the hash of the secret, listed per team on gsi1
export const apiKeyItem = (hash: string) => ({ pk: `KEY#${hash}`, sk: 'KEY' });
export const sessionItem = (hash: string) => ({ pk: `SESSION#${hash}`, sk: 'SESSION' });
export const teamKeysIndex = (teamId: string) => `TEAM#${teamId}#KEYS`;

// Projects and their deployment history
export const projectItem = (teamId: string, id: string) => ({ pk: teamPartition(teamId), sk: `PROJECT#${id}` });
export const PROJECTS_PREFIX = 'PROJECT#';
/** Claims a project name within the team (a conditional create). */
export const projectNameItem = (teamId: string, name: string) => ({
  pk: teamPartition(teamId),
  sk: `PROJECTNAME#${name}`,
});
/** Append-only: one item per promote / rollback / clear, ordered by time. */
export const projectDeploymentItem = (teamId: string, projectId: string, createdAt: string, id: string) => ({
  pk: teamPartition(teamId),
  sk: `PROJDEP#${projectId}#${createdAt}#${id}`,
});
export const projectDeploymentsPrefix = (projectId: string) => `PROJDEP#${projectId}#`;

// Datasets: a head item per name (the version counter) and one item per version
export const datasetHeadItem = (teamId: string, name: string) => ({ pk: teamPartition(teamId), sk: `DATASET#${name}` });
export const datasetVersionItem = (teamId: string, name: string, version: number) => ({
  pk: teamPartition(teamId),
  sk: `DSV#${name}#${String(version).padStart(6, '0')}`,
});
/** Every version of one dataset (`name`), or of all datasets. */
export const datasetVersionsPrefix = (name?: string) => (name === undefined ? 'DSV#' : `DSV#${name}#`);

// Training jobs and their checkpoints
export const jobItem = (teamId: string, id: string) => ({ pk: teamPartition(teamId), sk: `JOB#${id}` });
export const jobsIndex = (teamId: string) => `TEAM#${teamId}#JOBS`;
/** A checkpoint by its id (a checkpoint id is also a valid `base_model`). */
export const checkpointItem = (teamId: string, checkpointId: string) => ({
  pk: teamPartition(teamId),
  sk: `CKPT#${checkpointId}`,
});
/** Job → its checkpoints, in creation order, beside the id lookup. */
export const jobCheckpointItem = (teamId: string, jobId: string, createdAt: string, id: string) => ({
  pk: teamPartition(teamId),
  sk: `JOBCKPT#${jobId}#${createdAt}#${id}`,
});
export const jobCheckpointsPrefix = (jobId: string) => `JOBCKPT#${jobId}#`;
/** SageMaker training job name → team and job (AWS only: events name the SageMaker job). */
export const jobRefItem = (jobId: string) => ({ pk: `JOBREF#${jobId}`, sk: 'REF' });

// Evaluations, generation jobs, adaptive cycles
export const evaluationItem = (teamId: string, id: string) => ({ pk: teamPartition(teamId), sk: `EVAL#${id}` });
export const evaluationsIndex = (teamId: string) => `TEAM#${teamId}#EVALS`;
export const generationItem = (teamId: string, id: string) => ({ pk: teamPartition(teamId), sk: `GENJOB#${id}` });
export const generationsIndex = (teamId: string) => `TEAM#${teamId}#GENJOBS`;
export const cycleItem = (teamId: string, projectId: string, cycleId: string) => ({
  pk: teamPartition(teamId),
  sk: `ADAPTIVE#${projectId}#${cycleId}`,
});
export const cyclesPrefix = (projectId: string) => `ADAPTIVE#${projectId}#`;

// Compute running at once: slot n of a kind is held by one job, evaluation or generation (computeSlots.ts)
export const computeSlotItem = (teamId: string, kind: string, n: number) => ({
  pk: teamPartition(teamId),
  sk: `ACTIVE#${kind}#${String(n).padStart(4, '0')}`,
});
export const computeSlotsPrefix = (kind: string) => `ACTIVE#${kind}#`;

// Stored inferences: their own partition per team, sort key = the inference id (a ULID: time order)
export const inferencePartition = (teamId: string) => `TEAM#${teamId}#INF`;

// Usage: day and month counters and the per-request listing, in the team's partition
export const daySk = (day: string) => `USAGE#DAY#${day}`;
export const USAGE_DAYS_PREFIX = 'USAGE#DAY#';
export const monthSk = (month: string) => `USAGE#MONTH#${month}`;
export const requestSk = (row: { at: string; inference_id: string }) => `USAGEREQ#${row.at}#${row.inference_id}`;
export const USAGE_REQUESTS_PREFIX = 'USAGEREQ#';
/**
 * Billed usage of one model or endpoint in one UTC day or month: an item each, so no caller-chosen
 * string ever becomes an attribute name (DynamoDB's 400 KB item limit). `key` is the canonical
 * model id or the route path, hashed where it would make a long sort key (usageBatch.ts). A prefix
 * of its own, not `USAGE#DAY#`: the day listing's query must not page through them.
 */
export type UsagePeriod = 'DAY' | 'MONTH';
export type UsageBreakdown = 'MODEL' | 'ENDPOINT';
export const usageBreakdownPrefix = (period: UsagePeriod, when: string, kind: UsageBreakdown) =>
  `USAGEBY#${period}#${when}#${kind}#`;
export const usageBreakdownSk = (period: UsagePeriod, when: string, kind: UsageBreakdown, key: string) =>
  usageBreakdownPrefix(period, when, kind) + key;
/**
 * A usage batch a replay could not apply safely (its writer's sequence numbers were pruned from
 * an item it touches), kept for reconciliation: one installation-wide partition an operator
 * queries, keyed so that reporting the same batch twice writes one item.
 */
export const staleUsageItem = (teamId: string, writer: string, seq: number) => ({
  pk: 'USAGESTALE',
  sk: `${teamId}#${writer}#${String(seq).padStart(12, '0')}`,
});
export const STALE_USAGE_PARTITION = 'USAGESTALE';
