/**
 * GatewayKeys on API Gateway: one key per team, in the usage plan named `sift-<stage>-<plan>`.
 * Usage plans are found by name at run time: the authorizer can't be given their ids through its
 * environment (the plans hang off the stage, which depends on the authorizer).
 */
import { randomBytes } from 'node:crypto';
import {
  APIGatewayClient,
  CreateApiKeyCommand,
  CreateUsagePlanKeyCommand,
  DeleteApiKeyCommand,
  GetUsagePlansCommand,
} from '@aws-sdk/client-api-gateway';
import { STAGE_TAG } from '../core/gatewayKeys';
import type { GatewayKeys } from '../core/ports';
import type { Plan, Team } from '../core/teams';

export const usagePlanName = (stage: string, plan: Plan) => `sift-${stage}-${plan}`;

export class ApiGatewayKeys implements GatewayKeys {
  private plans: Promise<Map<string, string>> | undefined;

  constructor(
    private readonly stage: string,
    private readonly client: Pick<APIGatewayClient, 'send'> = new APIGatewayClient({}),
  ) {}

  private async usagePlanId(plan: Plan): Promise<string> {
    const name = usagePlanName(this.stage, plan);
    let id = (await this.loadPlans()).get(name);
    if (!id) {
      this.plans = undefined; // a plan added since the last look
      id = (await this.loadPlans()).get(name);
    }
    if (!id) throw new Error(`no API Gateway usage plan named ${name}`);
    return id;
  }

  private loadPlans(): Promise<Map<string, string>> {
    this.plans ??= (async () => {
      const byName = new Map<string, string>();
      let position: string | undefined;
      do {
        const page = await this.client.send(
          new GetUsagePlansCommand({ limit: 500, ...(position ? { position } : {}) }),
        );
        for (const p of page.items ?? []) if (p.name && p.id) byName.set(p.name, p.id);
        position = page.position;
      } while (position);
      return byName;
    })().catch((err: unknown) => {
      this.plans = undefined;
      throw err;
    });
    return this.plans;
  }

  async create(team: Pick<Team, 'id' | 'plan'>): Promise<{ id: string; value: string }> {
    const usagePlanId = await this.usagePlanId(team.plan);
    const value = randomBytes(30).toString('base64url'); // API Gateway wants 20–128 characters
    const key = await this.client.send(
      new CreateApiKeyCommand({
        name: `sift-${this.stage}-team-${team.id}-${team.plan}`,
        description: `Sift team ${team.id} (${team.plan} plan); named by the authorizer, never given to callers`,
        enabled: true,
        value,
        // the authorizer may delete only keys with its stage's tag (lib/constructs/usage-plans.ts)
        tags: { 'sift:team': team.id, 'sift:plan': team.plan, [STAGE_TAG]: this.stage },
      }),
    );
    if (!key.id) throw new Error('API Gateway created a key without an id');
    try {
      await this.client.send(new CreateUsagePlanKeyCommand({ usagePlanId, keyId: key.id, keyType: 'API_KEY' }));
    } catch (err) {
      // don't leave a key outside every plan; if that fails too, both failures are the error
      await this.delete(key.id).catch((deleteError: unknown) => {
        throw new AggregateError(
          [err, deleteError],
          `could not add API key ${key.id} to its usage plan, nor delete it afterwards`,
        );
      });
      throw err;
    }
    return { id: key.id, value };
  }

  async delete(id: string): Promise<void> {
    await this.client.send(new DeleteApiKeyCommand({ apiKey: id })).catch((err: { name?: string }) => {
      if (err.name !== 'NotFoundException') throw err;
    });
  }
}
