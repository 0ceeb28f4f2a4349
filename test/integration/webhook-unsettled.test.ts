/**
 * A webhook whose claim cannot be settled after the hand-on (Redis lost
 * between the put and the claim's second round trip) says so, by the
 * event's id, at warn (functions/shared/webhook.ts): handed on and not
 * marked delivered, a late redelivery is handed on again; not handed on and
 * not given back, redeliveries are held off (409) until its pending time
 * ends. The connection is cut inside the sink's put, on a real Redis.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { PolicyStore } from '@platform/rate-limit/config';
import type { APIGatewayProxyResult } from 'aws-lambda';
import type { Redis } from 'ioredis';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { createPlatform, platform, usePlatform } from '../../functions/shared/platform.ts';
import type { AcceptedEvent, EventSink } from '../../functions/shared/sink.ts';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { connected, targets } from '../support/targets.ts';

const PREFIX = '/ratelimit/test-webhook-unsettled';
const SLACK_SECRET = 'test-slack-signing-secret';

type Handler = (event: unknown, context: unknown) => Promise<APIGatewayProxyResult>;
const redis = (targets[0] as (typeof targets)[number]).client() as Redis;
const admin = (targets[0] as (typeof targets)[number]).admin();
const warned: { message: string; fields: Record<string, unknown> }[] = [];
const handedOn: AcceptedEvent[] = [];
/** What the sink does after it has the event: nothing, or throw (the queue refused it). */
let sinkFails = false;
let slack: Handler;

/** Settles once the connection the sink cut last is back (ioredis reconnects by itself). */
let back: Promise<unknown> = Promise.resolve();

/** A sink that loses the platform's Redis connection while it hands the event on. */
const cuttingSink: EventSink = {
  async put(event) {
    back = once(redis, 'ready');
    redis.stream.destroy();
    if (sinkFails) throw new Error('queue unavailable');
    handedOn.push(event);
  },
};

before(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const policies = new PolicyStore({
    prefix: PREFIX,
    defaults: PLATFORM_POLICIES,
    source: { fetchAll: async () => ({ [`${PREFIX}/secrets/slack/slack-signing-secret`]: SLACK_SECRET }) },
  });
  await policies.refresh();
  // the suite's environment names the cluster's ACL secret; this single-node client reconnects without one
  const secretFile = process.env.REDIS_AUTH_SECRET_FILE;
  delete process.env.REDIS_AUTH_SECRET_FILE;
  usePlatform(createPlatform({ redis, policies, sink: cuttingSink }));
  process.env.REDIS_AUTH_SECRET_FILE = secretFile;
  platform().logger.warn = ((message: string, fields: Record<string, unknown>) =>
    void warned.push({ message, fields })) as never;
  slack = (await import('../../functions/slack/handler.ts')).handler as unknown as Handler;
});
after(() => {
  usePlatform(undefined);
  redis.disconnect();
  admin.disconnect();
});

/** Until the cut connection is back (`connected` answers at once, refused, while it reconnects). */
const reconnected = () => back;

const context = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 10_000 };

function slackEvent(team: string, id: string) {
  const body = JSON.stringify({ type: 'event_callback', team_id: team, event_id: id, event: { channel: 'C1' } });
  return {
    httpMethod: 'POST',
    path: '/webhooks/slack',
    resource: '/webhooks/slack',
    headers: { 'Content-Type': 'application/json', ...signSlackBody(SLACK_SECRET, body) },
    body,
    isBase64Encoded: false,
    requestContext: { identity: { sourceIp: '203.0.113.51' }, requestId: randomUUID() },
  };
}

/** A new workspace, the connection back, nothing logged or handed on yet, the sink set to fail or not. */
async function freshTeam(failing: boolean): Promise<string> {
  await reconnected();
  warned.length = 0;
  handedOn.length = 0;
  sinkFails = failing;
  return `T${randomUUID().slice(0, 8)}`;
}

describe('A webhook claim left unsettled', () => {
  it('handed on but not marked delivered: 200, the event handed on once, a warn line by its id', async () => {
    // Prepare
    await connected(redis);
    const team = await freshTeam(false);
    // Act
    const answer = await slack(slackEvent(team, 'EvUnmarked1'), context);
    // Assess
    assert.equal(answer.statusCode, 200, answer.body);
    assert.deepEqual(
      handedOn.map((e) => e.id),
      ['EvUnmarked1'],
    );
    const line = warned.find((w) => w.message.startsWith('webhook claim not marked delivered'));
    assert.ok(line, JSON.stringify(warned));
    assert.deepEqual(
      { source: line.fields.source, scope: line.fields.scope, id: line.fields.id },
      { source: 'slack', scope: team, id: 'EvUnmarked1' },
    );
    assert.ok(line.fields.reason !== undefined && line.fields.reason !== 'marked');
    // the claim stays as the check took it (`<token>:<ms>`), not marked `:d`
    await connected(admin);
    const claim = await admin.get(`wh:{slack:${team}}:seen:EvUnmarked1`);
    assert.match(claim ?? '', /^[^:]+:\d+$/);
  });

  it('not handed on and not given back: 503, a warn line by its id, and a retry held off (409)', async () => {
    // Prepare
    const team = await freshTeam(true);
    // Act
    const answer = await slack(slackEvent(team, 'EvStuck1'), context);
    sinkFails = false;
    await reconnected();
    const retry = await slack(slackEvent(team, 'EvStuck1'), context);
    // Assess
    assert.equal(answer.statusCode, 503, answer.body);
    const line = warned.find((w) => w.message.startsWith('webhook claim not given back'));
    assert.ok(line, JSON.stringify(warned));
    assert.deepEqual(
      { source: line.fields.source, scope: line.fields.scope, id: line.fields.id },
      { source: 'slack', scope: team, id: 'EvStuck1' },
    );
    assert.equal(
      retry.statusCode,
      409,
      `the stale claim holds off the retry until its pending time ends: ${retry.body}`,
    );
    assert.equal(JSON.parse(retry.body).error, 'delivery_in_progress');
    assert.deepEqual(handedOn, [], 'nothing was handed on');
  });
});
