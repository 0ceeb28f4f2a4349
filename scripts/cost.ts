/**
 * `npm run cost -- [--stage prod] [--rate 1000]`: the monthly cost of a stage
 * at a check rate, from its synthesized templates (cdk.out; run
 * `npm run synth` first), the unit prices of config/prices.json and the
 * bytes the limiter's observer writes, measured by running it
 * (scripts/cost-bytes.ts). Prints every line and the limiter's part per
 * million checks (docs/deploy.md, "What the limiter costs per check").
 *
 * Options (defaults in brackets):
 *   --stage <name>           [prod] the stage whose templates are read
 *   --rate <checks/s>        [1000] limiter checks per second
 *   --requests <req/s>       [= rate] requests per second at the edge
 *   --refused <share>        [0.01] share of checks refused (a refusal line each)
 *   --check-ms <ms>          [2] a function's wait for one check
 *   --invocation-ms <ms>     [20] a function's mean invocation (sets the checks per container)
 *   --waf-flagged <share>    [0.01] share of requests WAF blocks or counts (logged under its filter)
 *   --per-check-lines        the observer as it was before batching: one EMF line per check
 *   --json                   the bill as JSON
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { measureWrittenBytes } from './cost-bytes.ts';
import { type Load, monthlyBill, type Prices, stageShape } from './cost-model.ts';

const ROOT = new URL('..', import.meta.url).pathname;

const { values } = parseArgs({
  options: {
    stage: { type: 'string', default: 'prod' },
    rate: { type: 'string', default: '1000' },
    requests: { type: 'string' },
    refused: { type: 'string', default: '0.01' },
    'check-ms': { type: 'string', default: '2' },
    'invocation-ms': { type: 'string', default: '20' },
    'waf-flagged': { type: 'string', default: '0.01' },
    'per-check-lines': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});

function positive(name: string, raw: string | undefined, { share = false } = {}): number {
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || (share && value > 1)) {
    console.error(`--${name} must be a ${share ? 'share between 0 and 1' : 'non-negative number'} (got ${raw})`);
    process.exit(2);
  }
  return value;
}

const checksPerSecond = positive('rate', values.rate);
const load: Load = {
  checksPerSecond,
  requestsPerSecond: positive('requests', values.requests ?? values.rate),
  refusedShare: positive('refused', values.refused, { share: true }),
  checkMs: positive('check-ms', values['check-ms']),
  invocationMs: positive('invocation-ms', values['invocation-ms']),
  wafFlaggedShare: positive('waf-flagged', values['waf-flagged'], { share: true }),
  // sizes of records written by AWS, not by this code: typical figures (docs/deploy.md)
  wafRecordBytes: 1500,
  accessLogBytes: 330,
};

const out = join(ROOT, 'cdk.out');
const files = (() => {
  try {
    return readdirSync(out).filter((f) => f.endsWith(`-${values.stage}.template.json`));
  } catch {
    return [];
  }
})();
if (files.length === 0) {
  console.error(`no templates of stage ${values.stage} in cdk.out: run npm run synth (-c stage=${values.stage}) first`);
  process.exit(2);
}
const shape = stageShape(files.map((f) => JSON.parse(readFileSync(join(out, f), 'utf8'))));
const prices = JSON.parse(readFileSync(join(ROOT, 'config/prices.json'), 'utf8')) as Prices;
// a container serves one invocation at a time: at most 1000 / invocation-ms checks per second each
const perContainer = Math.max(1e-3, Math.min(checksPerSecond, 1000 / Math.max(1, load.invocationMs)));
const bytes = measureWrittenBytes({
  checksPerContainerPerSecond: perContainer,
  ...(values['per-check-lines'] ? { batching: { maxChecks: 1, maxAgeMs: 0 } } : {}),
});
const bill = monthlyBill(shape, prices, bytes, load);

if (values.json) {
  console.log(JSON.stringify({ stage: values.stage, prices: prices.asOf, load, bytes, ...bill }, null, 2));
} else {
  const usd = (n: number) => n.toFixed(2).padStart(10);
  console.log(
    `stage ${values.stage} at ${checksPerSecond} checks/s, ${load.requestsPerSecond} requests/s; ${prices.region} prices of ${prices.asOf} (config/prices.json)`,
  );
  console.log(
    `measured: ${bytes.emfPerCheck.toFixed(1)} EMF bytes per check (${perContainer.toFixed(0)} checks/s per container), refusal line ${bytes.refusalLine} B`,
  );
  for (const part of ['limiter', 'platform'] as const) {
    console.log(`\n${part}`);
    for (const line of bill.lines.filter((l) => l.part === part)) {
      console.log(`${usd(line.usdPerMonth)}  ${line.item.padEnd(44)} ${line.basis}`);
    }
  }
  console.log(`\n${usd(bill.limiterPerMonth)}  limiter per month`);
  console.log(`${usd(bill.platformPerMonth)}  rest of the platform per month`);
  console.log(`${usd(bill.limiterPerMonth + bill.platformPerMonth)}  stage per month`);
  console.log(`\nlimiter per million checks: $${bill.limiterPerMillionChecks.toFixed(3)}`);
}
