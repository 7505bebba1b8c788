import { installationItem as INSTALL } from './recordKeys';
import { createApiKey, findStoredKey, GIVEN_KEY_EXAMPLE, givenKeyProblem } from './apiKeys';
import { changedOrGoneAsUndefined } from './errors';
import type { Services } from './context';
import { recoverProcessingVersions } from './datasets/service';
import { listEvaluations } from './evaluations';
import { listSyntheticDataJobs } from './syntheticData/jobs';
import { listProjects } from './projects';
import { createTeam, listTeams } from './teams';
import { listTrainingJobs, secondsToLastLog, transitionJob } from './trainingJobs';

interface Installation {
  operator_team_id: string;
  created_at: string;
}

/**
 * First start: creates the operator team and its key (the given SIFT_ADMIN_KEY, or a new one that
 * is returned so the caller can print it once). Later starts: adds SIFT_ADMIN_KEY if it is new.
 *
 * A SIFT_ADMIN_KEY that was revoked stays revoked, and the start is refused with what to do: serving
 * with the configured operator key dead would look healthy and answer the operator 401, and seeding it
 * again would undo a revocation (which may have been made because the key leaked).
 */
export async function ensureInstallation(
  svc: Services,
  adminKey?: string,
): Promise<{ teamId: string; createdKey?: string }> {
  const problem = adminKey === undefined ? undefined : givenKeyProblem(adminKey);
  if (problem) throw new Error(`SIFT_ADMIN_KEY is not usable as the operator key: ${problem}`);
  let install = await svc.records.get<Installation>(INSTALL.pk, INSTALL.sk);
  if (!install) {
    const team = await createTeam(svc, { name: 'default', plan: 'custom' });
    install = { operator_team_id: team.id, created_at: svc.now().toISOString() };
    await svc.records.put(INSTALL, install, { ifAbsent: true });
    const created = await createApiKey(svc, team.id, {
      name: 'operator',
      role: 'operator',
      ...(adminKey ? { key: adminKey } : {}),
    });
    return { teamId: team.id, ...(adminKey ? {} : { createdKey: created.key }) };
  }
  if (adminKey) {
    const stored = await findStoredKey(svc, adminKey);
    if (stored?.revoked_at) {
      throw new Error(
        `SIFT_ADMIN_KEY was revoked at ${stored.revoked_at} (key id ${stored.id}) and a revoked key stays revoked: set SIFT_ADMIN_KEY to a new key (e.g. ${GIVEN_KEY_EXAMPLE}) and start again, or unset it to keep using another operator key`,
      );
    }
    if (!stored)
      await createApiKey(svc, install.operator_team_id, {
        name: 'operator (SIFT_ADMIN_KEY)',
        role: 'operator',
        key: adminKey,
      });
  }
  return { teamId: install.operator_team_id };
}

/**
 * After a crash or restart (local mode): datasets left `processing` are validated again (or failed,
 * once their attempts are spent: datasets/service.ts MAX_PROCESSING_ATTEMPTS), jobs still
 * `requested` are queued again, jobs that were `running` are marked `failed` with the reason —
 * their process died with the service, so they are never left looking alive — and evaluations
 * and generation jobs still `running` are started again.
 */
export async function recoverInterruptedWork(
  svc: Services,
): Promise<{ datasets: number; jobs: number; workflows: number }> {
  const recovered = { datasets: 0, jobs: 0, workflows: 0 };
  for (const team of await listTeams(svc)) {
    // validated again, unless the process died in every attempt so far: then failed, not re-queued
    const datasets = await recoverProcessingVersions(svc, team.id);
    recovered.datasets += datasets.requeued + datasets.failed;
    for (const job of await listTrainingJobs(svc, team.id)) {
      if (job.status === 'running') {
        await transitionJob(svc, team.id, job.id, 'failed', {
          error:
            'Sift stopped while this job was running, and its training process ended with it. Checkpoints saved before that are kept; continue from one with base_model.',
          // billed for the time it trained, not until this restart
          compute_seconds: await secondsToLastLog(svc, team.id, job),
        }).catch(changedOrGoneAsUndefined);
        recovered.jobs += 1;
      } else if (job.status === 'requested') {
        await svc.training?.submit(team.id, job.id);
        recovered.jobs += 1;
      }
    }
    // generation and evaluation tasks are idempotent: an interrupted one simply runs again
    for (const job of await listSyntheticDataJobs(svc, team.id)) {
      if ((job.status !== 'queued' && job.status !== 'running') || !svc.workflows) continue;
      await svc.workflows.start('generation', `gen-${job.job_id}`, { jobId: job.job_id, teamId: team.id });
      recovered.workflows += 1;
    }
    for (const evaluation of await listEvaluations(svc, team.id, {})) {
      if (evaluation.status !== 'running' || !svc.workflows) continue;
      await svc.workflows.start('evaluation', `eval-${evaluation.id}`, {
        evaluationId: evaluation.id,
        teamId: team.id,
      });
      recovered.workflows += 1;
    }
    // adaptive cycles resume from their record (each task checks what the last attempt finished)
    for (const project of await listProjects(svc, team.id)) {
      if (!project.adaptive_cycle_id || !svc.workflows) continue;
      await svc.workflows.start('adaptive', `adaptive-${project.adaptive_cycle_id}`, {
        trigger: 'resume',
        teamId: team.id,
        projectId: project.id,
        cycleId: project.adaptive_cycle_id,
      });
      recovered.workflows += 1;
    }
  }
  return recovered;
}
