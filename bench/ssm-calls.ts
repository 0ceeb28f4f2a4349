/**
 * `npm run measure:ssm`: how many SSM calls one warm container makes per minute
 * under load. The real PolicyStore and Powertools' SSM pagination run against
 * a counting SSM stand-in (aws-sdk-client-mock) holding the production
 * parameter set; time is simulated, 1000 requests per second for 10 minutes.
 */
import { GetParametersByPathCommand, SSMClient } from '@aws-sdk/client-ssm';
import { PolicyStore } from '@platform/rate-limit/config';
import { SsmParameterSource } from '@platform/rate-limit/ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { PLATFORM_POLICIES } from '../config/catalogue.ts';

const PREFIX = '/ratelimit/prod';
const parameters = [
  ...Object.entries(PLATFORM_POLICIES).map(([name, config]) => ({
    Name: `${PREFIX}/defaults/${name}`,
    Value: JSON.stringify(config),
  })),
  { Name: `${PREFIX}/overrides/api-key`, Value: '{"capacity": 200}' },
  { Name: `${PREFIX}/overrides/api-key/partner-hash`, Value: '{"capacity": 2000}' },
  { Name: `${PREFIX}/secrets/login/email-pepper`, Value: 'pepper', Type: 'SecureString' as const },
];
const PAGE = 10; // GetParametersByPath returns at most 10 parameters per call
const ssm = mockClient(SSMClient);
ssm.on(GetParametersByPathCommand).callsFake((input: { NextToken?: string }) => {
  const start = Number(input.NextToken ?? 0);
  const next = start + PAGE;
  return { Parameters: parameters.slice(start, next), NextToken: next < parameters.length ? String(next) : undefined };
});

const clock = { now: 0 };
const store = new PolicyStore({
  prefix: PREFIX,
  source: new SsmParameterSource(new SSMClient({ region: 'eu-west-1' })),
  defaults: PLATFORM_POLICIES,
  now: () => clock.now,
});
await store.ready();
const MINUTES = 10;
const PER_SECOND = 1000;
let requests = 0;
for (let ms = 0; ms < MINUTES * 60_000; ms += 1000 / PER_SECOND) {
  clock.now = ms;
  store.resolve('api-key', 'partner-hash');
  requests++;
  if (ms % 1000 === 0) await new Promise((resolve) => setImmediate(resolve)); // let a started refresh finish
}
const calls = ssm.commandCalls(GetParametersByPathCommand).length;
console.log(
  `${requests} requests over ${MINUTES} simulated minutes: ${calls} GetParametersByPath calls, ` +
    `${(calls / MINUTES).toFixed(1)} per minute (${parameters.length} parameters, ${Math.ceil(parameters.length / PAGE)} pages per refresh, TTL 60 s)`,
);
