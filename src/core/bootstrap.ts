import { apiKeyExists, createApiKey } from './apiKeys';
import type { Services } from './context';
import { findProcessingVersions } from './datasets/service';
import { API_KEY_PREFIX } from './ids';
import { createTeam, listTeams } from './teams';

interface Installation {
  operator_team_id: string;
  created_at: string;
}

const INSTALL = { pk: 'INSTALL', sk: 'INSTALL' };

/**
 * First start: creates the operator team and its key (the given SIFT_ADMIN_KEY, or a new one that
 * is returned so the caller can print it once). Later starts: adds SIFT_ADMIN_KEY if it is new.
 */
export async function ensureInstallation(svc: Services, adminKey?: string): Promise<{ teamId: string; createdKey?: string }> {
  if (adminKey !== undefined && !adminKey.startsWith(API_KEY_PREFIX)) {
    throw new Error(`SIFT_ADMIN_KEY must start with ${API_KEY_PREFIX}`);
  }
  let install = await svc.records.get<Installation>(INSTALL.pk, INSTALL.sk);
  if (!install) {
    const team = await createTeam(svc, { name: 'default', plan: 'custom' });
    install = { operator_team_id: team.id, created_at: svc.now().toISOString() };
    await svc.records.put(INSTALL, install, { ifAbsent: true });
    const created = await createApiKey(svc, team.id, { name: 'operator', role: 'operator', ...(adminKey ? { key: adminKey } : {}) });
    return { teamId: team.id, ...(adminKey ? {} : { createdKey: created.key }) };
  }
  if (adminKey && !(await apiKeyExists(svc, adminKey))) {
    await createApiKey(svc, install.operator_team_id, { name: 'operator (SIFT_ADMIN_KEY)', role: 'operator', key: adminKey });
  }
  return { teamId: install.operator_team_id };
}

/** Work interrupted by a crash or restart is picked up again (the records are the source of truth). */
export async function recoverInterruptedWork(svc: Services): Promise<number> {
  let requeued = 0;
  for (const team of await listTeams(svc)) {
    for (const v of await findProcessingVersions(svc, team.id)) {
      await svc.queue.send({ type: 'dataset.process', team_id: team.id, dataset_name: v.name, version: v.version });
      requeued += 1;
    }
  }
  return requeued;
}
