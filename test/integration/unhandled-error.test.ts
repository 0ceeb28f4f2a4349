/**
 * An error a route's handler did not expect: the house handler answers a
 * generic 500 (no stack, no message of the error) and logs one line that the
 * deployment's metric filter counts (UNHANDLED_ERROR; the filter and its
 * rollback alarm: test/infra/platform-app.test.ts). Lambda counts such an
 * invocation as a success, so that line is all a canary's alarm can see.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PolicyStore } from '@platform/rate-limit/config';
import { FilterPattern } from 'aws-cdk-lib/aws-logs';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import type { Route } from '../../functions/route.ts';
import { routeHandler } from '../../functions/shared/http.ts';
import { UNHANDLED_ERROR } from '../../functions/shared/metrics.ts';
import { createPlatform, usePlatform } from '../../functions/shared/platform.ts';
import { targets } from '../support/targets.ts';

const redis = (targets[0] as (typeof targets)[number]).client();
const route = {
  id: 'sample-route',
  methods: ['GET'],
  path: '/sample',
  handler: 'sample/handler.ts',
  rawBody: false,
  limits: [],
  uses: [],
  secrets: [],
  inHandler: [],
} as const satisfies Route;

before(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const policies = new PolicyStore({
    prefix: '/ratelimit/test-unhandled',
    defaults: PLATFORM_POLICIES,
    source: { fetchAll: async () => ({}) },
  });
  await policies.refresh();
  usePlatform(createPlatform({ redis, policies })); // the platform's own logger: its JSON lines as Lambda gets them
});
after(() => {
  usePlatform(undefined);
  redis.disconnect();
});

/** What the process writes to stdout and stderr while `act` runs (the logger's lines), and what `act` returned. */
async function written<T>(act: () => Promise<T>): Promise<{ lines: string[]; result: T }> {
  const lines: string[] = [];
  const streams = [process.stdout, process.stderr];
  const writes = streams.map((stream) => stream.write);
  for (const stream of streams)
    stream.write = ((chunk: string | Uint8Array) => {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      return true;
    }) as typeof stream.write;
  try {
    return { lines, result: await act() };
  } finally {
    streams.forEach((stream, i) => {
      stream.write = writes[i] as typeof stream.write;
    });
  }
}

/** Whether a JSON log line matches a metric filter's `{ $.field = "value" }` pattern, as CloudWatch reads it. */
function matches(pattern: string, line: string): boolean {
  const [, field, value] = /^\{ \$\.(\w+) = "(.*)" \}$/.exec(pattern) ?? [];
  assert.ok(field !== undefined, `a pattern of the one shape this test reads: ${pattern}`);
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return false;
  }
  return parsed[field] === value;
}

describe('An error a handler did not expect', () => {
  it('is answered 500 without a stack, and logged once in the line the metric filter counts, by route', async () => {
    const handler = routeHandler(route, async () => {
      throw new TypeError("Cannot read properties of undefined (reading 'secret-detail')");
    });
    const event = {
      httpMethod: 'GET',
      path: '/sample',
      resource: '/sample',
      headers: {},
      body: null,
      requestContext: { identity: { sourceIp: '203.0.113.9' } },
    };
    const { lines, result } = await written(
      () =>
        handler(
          event as never,
          { awsRequestId: 'r-1', getRemainingTimeInMillis: () => 10_000 } as never,
        ) as Promise<APIGatewayProxyResult>,
    );
    assert.equal(result.statusCode, 500);
    assert.doesNotMatch(String(result.body), /secret-detail|TypeError|at /);
    const pattern = FilterPattern.stringValue('$.message', '=', UNHANDLED_ERROR.message).logPatternString;
    const counted = lines.filter((line) => matches(pattern, line));
    assert.equal(counted.length, 1, `one line the filter counts among: ${lines.join('\n')}`);
    assert.equal((JSON.parse(counted[0] as string) as { route?: string }).route, route.id, 'its route dimension');
  });
});
