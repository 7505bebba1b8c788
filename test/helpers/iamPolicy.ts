/**
 * IAM's evaluation of identity-based policy statements, the part the rehearsal relies on ("Policy
 * evaluation logic", https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
 * a request is allowed only when some Allow statement matches its action and resource and no Deny
 * statement does (implicit deny otherwise). Actions match case-insensitively, resources
 * case-sensitively, both with the `*` and `?` wildcards ("IAM JSON policy elements: Action /
 * Resource", https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html).
 * Not modelled: Condition, NotAction, NotResource, Principal (a statement carrying one is refused
 * when the policy is loaded, so a template that starts using one is noticed), policy variables.
 */
export interface Statement {
  Effect: 'Allow' | 'Deny';
  Action: string | string[];
  Resource: string | string[];
  Sid?: string;
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
  private readonly rules: { allow: boolean; actions: RegExp[]; resources: RegExp[] }[];

  constructor(statements: Statement[]) {
    this.rules = statements.map((s) => {
      const unmodelled = ['Condition', 'NotAction', 'NotResource', 'Principal'].filter((k) => k in s);
      if (unmodelled.length) throw new Error(`statement ${s.Sid ?? ''}: ${unmodelled.join(', ')} not modelled`);
      return {
        allow: s.Effect === 'Allow',
        actions: list(s.Action).map((a) => glob(a, 'i')),
        resources: list(s.Resource).map((r) => glob(r, '')),
      };
    });
  }

  allows(action: string, resource: string): boolean {
    const matching = this.rules.filter(
      (r) => r.actions.some((a) => a.test(action)) && r.resources.some((x) => x.test(resource)),
    );
    return matching.some((r) => r.allow) && !matching.some((r) => !r.allow);
  }
}
