/**
 * IAM's evaluation of identity-based policy statements, the part the rehearsal relies on ("Policy
 * evaluation logic", https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
 * a request is allowed only when some Allow statement matches its action and resource and no Deny
 * statement does (implicit deny otherwise). Actions match case-insensitively, resources
 * case-sensitively, both with the `*` and `?` wildcards ("IAM JSON policy elements: Action /
 * Resource", https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html).
 * Conditions: only `StringEquals` on `aws:ResourceTag/<key>` ("IAM JSON policy elements: Condition
 * operators", https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html:
 * a key missing from the request context does not match), with the resource's tags supplied by the
 * stand-in that holds the resource. Not modelled: any other condition, NotAction, NotResource,
 * Principal (a statement carrying one is refused when the policy is loaded, so a template that starts
 * using one is noticed), policy variables.
 */
export interface Statement {
  Effect: 'Allow' | 'Deny';
  Action: string | string[];
  Resource: string | string[];
  Condition?: Record<string, Record<string, string | string[]>>;
  Sid?: string;
}

/** What IAM knows about the resource besides its ARN: its tags (`aws:ResourceTag/*`). */
export type ResourceTags = (resource: string) => Record<string, string> | undefined;

const RESOURCE_TAG = 'aws:ResourceTag/';

function tagConditions(s: Statement): [string, string[]][] {
  const out: [string, string[]][] = [];
  for (const [operator, keys] of Object.entries(s.Condition ?? {})) {
    for (const [key, value] of Object.entries(keys)) {
      if (operator !== 'StringEquals' || !key.startsWith(RESOURCE_TAG))
        throw new Error(`statement ${s.Sid ?? ''}: condition ${operator} ${key} not modelled`);
      out.push([key.slice(RESOURCE_TAG.length), list(value)]);
    }
  }
  return out;
}

const list = <T>(v: T | T[]) => (Array.isArray(v) ? v : [v]);

const glob = (pattern: string, flags: string) =>
  new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
    flags,
  );

export class IamPolicy {
  private readonly rules: {
    allow: boolean;
    actions: RegExp[];
    resources: RegExp[];
    tags: [string, string[]][];
  }[];

  constructor(statements: Statement[]) {
    this.rules = statements.map((s) => {
      const unmodelled = ['NotAction', 'NotResource', 'Principal'].filter((k) => k in s);
      if (unmodelled.length) throw new Error(`statement ${s.Sid ?? ''}: ${unmodelled.join(', ')} not modelled`);
      return {
        allow: s.Effect === 'Allow',
        actions: list(s.Action).map((a) => glob(a, 'i')),
        resources: list(s.Resource).map((r) => glob(r, '')),
        tags: tagConditions(s),
      };
    });
  }

  allows(action: string, resource: string, resourceTags: ResourceTags = () => undefined): boolean {
    const matching = this.rules.filter(
      (r) =>
        r.actions.some((a) => a.test(action)) &&
        r.resources.some((x) => x.test(resource)) &&
        (r.tags.length === 0 || r.tags.every(([key, values]) => values.includes(resourceTags(resource)?.[key] ?? ''))),
    );
    return matching.some((r) => r.allow) && !matching.some((r) => !r.allow);
  }
}
