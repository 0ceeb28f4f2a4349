/**
 * `npm run lint:cfn`: the synthesized templates checked against
 * CloudFormation's own resource schemas with cfn-lint (preinstalled on the
 * development and CI machines), for every shape the app can take: ElastiCache
 * (the default), MemoryDB, with egress for the harvester and the Mattermost
 * listener, and the two-region stage. Errors fail it; warnings are printed. Run after
 * `npm run build` (npm run synth builds).
 *
 * The two acknowledged findings are both E3002, properties cfn-lint 1.51's
 * schema predates: the replication group's Durability (infra/valkey-cluster.ts)
 * and the dashboard's Tags (infra/consumer-health.ts).
 */
import { execFile } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = new URL('..', import.meta.url).pathname;

const VARIANTS: Record<string, string[]> = {
  elasticache: [],
  // a stage of its own, placed by -c (it has no stage file): infra/stages/prod.json keeps prod on ElastiCache
  memorydb: [
    '-c',
    'redis=memorydb',
    '-c',
    'stage=lintmemorydb',
    '-c',
    'account=111111111111',
    '-c',
    'region=eu-west-1',
  ],
  dev: ['-c', 'stage=dev'],
  // two regions (infra/stages/global.json): Global Datastore, MemoryDB Multi-Region, the peering, the rebalancer
  global: ['-c', 'stage=global'],
  egress: [
    '-c',
    'egress=nat',
    '-c',
    'harvesterSource=https://source.example',
    '-c',
    'harvesterSites=a,b',
    '-c',
    'mattermostUrl=https://chat.example',
  ],
};

let failed = false;
for (const [variant, context] of Object.entries(VARIANTS)) {
  const out = join(ROOT, 'cdk.out', `lint-${variant}`);
  rmSync(out, { recursive: true, force: true }); // only this run's templates
  await run('npx', ['--no-install', 'cdk', 'synth', '--no-lookups', '--quiet', '-o', out, ...context], {
    cwd: join(ROOT, 'infra'),
  });
  const templates = readdirSync(out)
    .filter((f) => f.endsWith('.template.json'))
    .map((f) => join(out, f));
  try {
    const { stdout } = await run('cfn-lint', ['--non-zero-exit-code', 'error', ...templates]);
    console.log(
      `${variant}: ${templates.length} templates, no error${stdout.trim() ? ` (warnings below)\n${stdout}` : ''}`,
    );
  } catch (error) {
    const { code, stdout } = error as { code?: number | string; stdout?: string };
    if (code === 'ENOENT') {
      console.error('cfn-lint is not installed (pip install cfn-lint)');
      process.exit(2);
    }
    failed = true;
    console.error(`${variant}: cfn-lint found errors\n${stdout ?? ''}`);
  }
}
process.exit(failed ? 1 : 0);
