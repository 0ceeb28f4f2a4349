/**
 * 4 OS processes flood one Slack channel through the gateway at once: exactly
 * the channel's limit is accepted, and exactly those events reach the sink.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { consumers, type TestPlatform } from '../support/consumers.ts';

const WORKER = new URL('../support/flood-worker.ts', import.meta.url).pathname;
const PROCESSES = 4;
const EACH = 40; // 160 deliveries for a channel limit of 60 per minute

let platform: TestPlatform;
before(async () => {
  platform = await consumers();
});
after(() => platform.close());

describe('A webhook channel flooded by 4 processes', () => {
  it('accepts exactly the channel limit, and the sink holds exactly those events', async (t) => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const results = await Promise.all(
      Array.from({ length: PROCESSES }, async (_, worker) => {
        const input = { base: platform.base, team, channel: 'CHOT', count: EACH, worker };
        const { stdout } = await promisify(execFile)(process.execPath, [WORKER, JSON.stringify(input)]);
        return JSON.parse(stdout) as number[];
      }),
    );
    const statuses = results.flat();
    const accepted = statuses.filter((s) => s === 200).length;
    t.diagnostic(`${accepted} accepted, ${statuses.filter((s) => s === 429).length} refused of ${statuses.length}`);
    assert.equal(accepted, 60);
    assert.equal(statuses.filter((s) => s === 429).length, PROCESSES * EACH - 60);
    const sunk = platform.events().filter((e) => e.scope === team);
    assert.equal(sunk.length, 60);
    assert.equal(new Set(sunk.map((e) => e.id)).size, 60, 'no event twice');
  });
});
