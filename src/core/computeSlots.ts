/**
 * Compute a team has running at once (limits.ts `CONCURRENT_COMPUTE`), exact under concurrency
 * without transactions: the team's slots of a kind are items `ACTIVE#<kind>#<n>`, n < cap, and a
 * create holds one by a conditional write (`holder` absent → its id). Two creates racing for the
 * last slot write the same item: one wins, the other gets 429. The transition that ends the job
 * (itself conditional, so once) releases the slot by another conditional write (`holder` = its id).
 *
 * Nothing can leave a slot held for good: a slot whose holder has ended (its release failed, or the
 * process died in between) or whose holder record was never written (a create that died after
 * taking it) is reclaimed by the next create that finds every slot taken. Slots only use GetItem,
 * UpdateItem and Query, so every process that ends jobs can release them (the SageMaker events
 * Lambda included).
 */
import type { Services } from './context';
import { RateLimitError } from './errors';
import { CONCURRENT_COMPUTE, CONCURRENT_COMPUTE_RETRY_SECONDS, type ComputeKind } from './limits';
import { WriteConflict } from './ports';
import {
  computeSlotItem,
  computeSlotsPrefix,
  evaluationItem,
  generationItem,
  jobItem,
  teamPartition,
} from './recordKeys';
import { getTeam } from './teams';

export type { ComputeKind } from './limits';

interface Slot {
  kind: ComputeKind;
  slot: number;
  holder?: string;
  acquired_at?: string;
}

/** A create writes its record right after taking its slot; a slot this old with no record is a create that died. */
export const ORPHAN_SLOT_GRACE_MS = 5 * 60_000;

const NOUN: Record<ComputeKind, string> = {
  training: 'training jobs',
  evaluation: 'evaluations',
  generation: 'generation jobs',
};
const ACTIVE_STATES: Record<ComputeKind, string[]> = {
  training: ['requested', 'running'],
  evaluation: ['running'],
  generation: ['queued', 'running'],
};

const holderItem = (teamId: string, kind: ComputeKind, id: string) =>
  kind === 'training'
    ? jobItem(teamId, id)
    : kind === 'evaluation'
      ? evaluationItem(teamId, id)
      : generationItem(teamId, id);

export async function computeCap(svc: Services, teamId: string, kind: ComputeKind): Promise<number> {
  return CONCURRENT_COMPUTE[(await getTeam(svc, teamId)).plan][kind];
}

const slotsOf = (svc: Services, teamId: string, kind: ComputeKind) =>
  svc.records.queryAll<Slot>(teamPartition(teamId), { beginsWith: computeSlotsPrefix(kind), max: 1000 });

/** Whether a held slot's holder can no longer be running: it ended, or its record never appeared. */
async function isStale(svc: Services, teamId: string, slot: Slot): Promise<boolean> {
  const key = holderItem(teamId, slot.kind, slot.holder!);
  const holder = await svc.records.get<{ status?: string }>(key.pk, key.sk, true);
  if (holder) return !ACTIVE_STATES[slot.kind].includes(String(holder.status));
  return svc.now().getTime() - Date.parse(slot.acquired_at ?? '') > ORPHAN_SLOT_GRACE_MS;
}

async function take(svc: Services, teamId: string, kind: ComputeKind, n: number, holderId: string): Promise<boolean> {
  const item = computeSlotItem(teamId, kind, n);
  try {
    await svc.records.update(item.pk, item.sk, {
      set: { kind, slot: n, holder: holderId, acquired_at: svc.now().toISOString() },
      condition: [{ attr: 'holder', present: false }],
    });
    return true;
  } catch (err) {
    if (err instanceof WriteConflict) return false;
    throw err;
  }
}

/** Frees `slot` if it is still held by the holder read (whoever took it since keeps it). */
async function free(svc: Services, teamId: string, slot: Slot): Promise<boolean> {
  const item = computeSlotItem(teamId, slot.kind, slot.slot);
  try {
    await svc.records.update(item.pk, item.sk, {
      remove: ['holder', 'acquired_at'],
      condition: [{ attr: 'holder', equals: slot.holder }],
    });
    return true;
  } catch (err) {
    if (err instanceof WriteConflict) return false;
    throw err;
  }
}

/**
 * How many slot numbers (0 … k-1) a create may take: the largest k with k + (held slots at n ≥ k)
 * ≤ cap. Slots at n ≥ cap were taken under a larger plan and count until freed; creates only ever
 * take n < k, so however creates race, the held slots never exceed the cap.
 */
export function usableSlots(cap: number, heldAt: number[]): number {
  let k = cap;
  while (k > 0 && k + heldAt.filter((n) => n >= k).length > cap) k -= 1;
  return k;
}

/**
 * Holds one of the team's slots of `kind` for `holderId` (the id its record will have), or throws
 * 429 `concurrent_jobs` naming the cap. Call before writing the record; release it if the create fails.
 */
export async function acquireComputeSlot(
  svc: Services,
  teamId: string,
  kind: ComputeKind,
  holderId: string,
): Promise<void> {
  const cap = await computeCap(svc, teamId, kind);
  for (let pass = 0; pass < 2; pass++) {
    const held = (await slotsOf(svc, teamId, kind)).filter((s) => s.holder);
    const taken = new Set(held.map((s) => s.slot));
    const usable = usableSlots(cap, [...taken]);
    for (let n = 0; n < usable; n++) {
      if (!taken.has(n) && (await take(svc, teamId, kind, n, holderId))) return;
    }
    if (pass === 1) break;
    // every slot it may take is held: free those whose holder has ended, then look once more
    let freed = false;
    for (const slot of held) if ((await isStale(svc, teamId, slot)) && (await free(svc, teamId, slot))) freed = true;
    if (!freed) break;
  }
  throw new RateLimitError(
    `Your plan runs at most ${cap} ${NOUN[kind]} at once (concurrent_jobs); retry when one of them has finished`,
    CONCURRENT_COMPUTE_RETRY_SECONDS,
    'concurrent_jobs',
  );
}

/**
 * Frees the slot `holderId` holds, if it still holds one (idempotent). Never rejects: a slot whose
 * release failed belongs to an ended holder, which the next create reclaims.
 */
export async function releaseComputeSlot(
  svc: Services,
  teamId: string,
  kind: ComputeKind,
  holderId: string,
): Promise<void> {
  try {
    for (const slot of await slotsOf(svc, teamId, kind)) if (slot.holder === holderId) await free(svc, teamId, slot);
  } catch {
    // reclaimed by the next acquire (isStale): the holder has ended, so it can never look alive again
  }
}

/** What a team holds now, per kind (held slots; stale ones included until reclaimed). */
export async function computeInUse(svc: Services, teamId: string, kind: ComputeKind): Promise<number> {
  return (await slotsOf(svc, teamId, kind)).filter((s) => s.holder).length;
}
