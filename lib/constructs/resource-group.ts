/**
 * Focused constructs that keep the logical IDs their resources had before the split.
 *
 * A logical ID is made from the construct path, so moving a resource under a new construct would
 * rename it and CloudFormation would replace it (a new WAF ACL, authorizer or policy) on the next
 * deploy. A `ResourceGroup` is left out of its resources' logical IDs by stacks that allocate IDs
 * with `logicalIdSkippingGroups` (ApiStack), so a group can be added around existing resources
 * without replacing anything.
 */
import { Names, Stack, type CfnElement } from 'aws-cdk-lib';
import { Construct, type IConstruct } from 'constructs';

export class ResourceGroup extends Construct {}

/** CDK's own unique id (`Names.uniqueId`, the algorithm logical IDs use) of a path of construct ids. */
export function uniqueIdOfPath(components: readonly string[]): string {
  let scope = new Construct(undefined as unknown as Construct, '');
  for (const id of components) scope = new Construct(scope, id);
  return Names.uniqueId(scope);
}

const idsOutsideGroups = (scopes: readonly IConstruct[]): string[] =>
  scopes.filter((s) => !(s instanceof ResourceGroup)).map((s) => s.node.id);

/** For `Stack.allocateLogicalId`: an element's logical ID with every `ResourceGroup` left out of its path; undefined when it is in none. */
export function allocateSkippingGroups(element: CfnElement): string | undefined {
  const scopes = element.node.scopes.slice(element.node.scopes.indexOf(element.stack) + 1);
  if (!scopes.some((s) => s instanceof ResourceGroup)) return undefined;
  return uniqueIdOfPath(idsOutsideGroups(scopes));
}

/** The logical ID of a child `childId` of `scope`, with groups left out (for ids CDK makes from other constructs' paths). */
export function logicalIdSkippingGroups(scope: IConstruct, childId: string): string {
  const scopes = scope.node.scopes.slice(scope.node.scopes.indexOf(Stack.of(scope)) + 1);
  return uniqueIdOfPath([...idsOutsideGroups(scopes), childId]);
}

/** `Names.uniqueId(construct)` as it would be with groups left out (ids that CDK derives from it, e.g. a Lambda permission's). */
export function uniqueIdSkippingGroups(construct: IConstruct): string {
  return uniqueIdOfPath(idsOutsideGroups(construct.node.scopes.slice(1)));
}
