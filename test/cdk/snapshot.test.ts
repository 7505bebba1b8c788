/**
 * Template snapshots of every stack (dev stage). Asset hashes change with
 * every code edit, so they are normalized; everything else is compared as is.
 * Update deliberately with `jest test/cdk/snapshot -u` and review the diff.
 */
import { buildApp } from './helpers';

const built = buildApp();

function normalize(template: unknown): unknown {
  const text = JSON.stringify(template)
    .replace(/[0-9a-f]{64}(\.zip|\.json)?/g, (_m, ext: string | undefined) => `<asset-hash>${ext ?? ''}`)
    .replace(/cdk-hnb659fds-container-assets-[^"]*?:(?=<asset-hash>)/g, 'cdk-container-assets:');
  return JSON.parse(text);
}

describe('template snapshots', () => {
  it.each(Object.entries(built.stacks))('%s stack', (_name, stack) => {
    expect(normalize(built.template(stack).toJSON())).toMatchSnapshot();
  });
});
