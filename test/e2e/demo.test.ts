/**
 * `npm run demo`, short: every scenario ends as the policies say (checked
 * from the recorded counts), and the report renders in a real headless
 * Chromium: not blank, every chart present, no console error.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { judge, runDemo } from '../../scripts/demo.ts';

const CHROMIUM = '/usr/bin/chromium';
/** Headless flags for a machine without network access (Chromium's background services would try to reach Google). */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const limit = (name: string) => (PLATFORM_POLICIES[name] as { limit: number }).limit;

describe('npm run demo', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rl-demo-test-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  let run: Awaited<ReturnType<typeof runDemo>>;

  it('plays every consumer, and each row is ok by its recorded counts', async () => {
    run = await runDemo({ outDir: dir, short: true, log: () => {} });
    const byId = Object.fromEntries(run.results.map((r) => [r.id, r]));
    for (const r of run.results) {
      const total = r.counts.admitted + r.counts.limited + r.counts.degraded;
      assert.equal(total, r.timeline.length, `${r.title}: every request counted once`);
      assert.equal(r.ok, judge(r.counts, r.expected), `${r.title}: the ok column is the counts' verdict`);
      assert.ok(r.ok, `${r.title}: ${JSON.stringify(r.counts)} expected ${JSON.stringify(r.expected)}`);
    }
    // The headline numbers, recomputed here from the policies and the counts.
    assert.equal(byId['login-ip']?.counts.admitted, limit('login-ip'));
    assert.equal(byId['slack-CFLOOD']?.counts.admitted, limit('slack-channel'));
    assert.equal(byId['slack-CQUIET']?.counts.limited, 0, 'the quiet channel is untouched');
    assert.equal(byId.telegram?.counts.admitted, limit('telegram-chat'));
    assert.equal(byId.mattermost?.counts.admitted, limit('mattermost-channel'));
    assert.ok((byId['redis-down-login']?.counts.degraded ?? 0) > 0, 'login refused with 503 while Redis was down');
    assert.ok((byId['redis-down-login']?.counts.admitted ?? 0) > 0, 'and decided again after');
    assert.ok((byId['redis-down-api']?.counts.degraded ?? 0) > 0, 'the API served while Redis was down');
  });

  it('writes a report that renders in headless Chromium: not blank, every chart, no console error', async (t) => {
    if (!existsSync(CHROMIUM)) {
      t.skip('Chromium is not installed here; .ci/run installs it (apt-get install chromium)');
      return;
    }
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    t.after(() => browser.close());
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    const errors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
    const blank = await page.screenshot({ fullPage: true });
    await page.goto(pathToFileURL(run.report).href);
    const charts = await page.$$eval('figure.chart svg', (svgs) =>
      svgs.map((svg) => {
        const box = svg.getBoundingClientRect();
        return { width: box.width, height: box.height, marks: svg.querySelectorAll('path').length };
      }),
    );
    assert.equal(charts.length, run.results.length, 'one chart per scenario');
    for (const chart of charts)
      assert.ok(chart.width > 100 && chart.height > 100 && chart.marks > 0, JSON.stringify(chart));
    const rows = await page.$$eval('tbody tr', (trs) => trs.length);
    assert.equal(rows, run.results.length);
    const shot = await page.screenshot({ fullPage: true });
    assert.ok(shot.length > 10 * blank.length, `the page is not blank: ${shot.length} bytes vs ${blank.length} blank`);
    assert.deepEqual(errors, []);
  });
});
