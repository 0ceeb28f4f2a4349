/**
 * `npm run bench:profile`: where the client's CPU goes in a check. Runs the
 * limiter's token-bucket check on a hot key (c=128, then c=1) under
 * V8's CPU profiler (what `node --cpu-prof` runs, started after a warm-up and
 * stopped after the measured checks), beside the minimal client (the reference script's one
 * EVALSHA), and sums the profile's self time by function and by part (the
 * layer, ioredis, Node's net/stream internals, the benchmark loop, GC), so a
 * change to the client is aimed at what costs. Writes
 * bench/results/profile-<time>.md (and keeps the .cpuprofile files next to it,
 * for Chrome's DevTools).
 *
 *   BENCH_CHECKS  checks per client and concurrency (default 200000)
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import { createRedisClient } from '@platform/rate-limit';
import { Redis } from 'ioredis';
import { startRedis } from '../scripts/redis-process.ts';
import { benchLimiters } from './limiters.ts';
import { pinnedToCpu0 } from './measure.ts';

const CHECKS = Number(process.env.BENCH_CHECKS ?? 200_000);
const OUT = process.env.BENCH_OUT ?? new URL('./results/', import.meta.url).pathname;

/** One profiled run (a child process): `node bench/client-profile.ts --child <url> <limiter> <c> <profile file>`. */
async function child(url: string, id: string, concurrency: number, profileFile: string): Promise<void> {
  const plain = new Redis(url);
  const ours = createRedisClient({ url });
  await ours.connect();
  const limiter = (await benchLimiters(ours, plain)).find((l) => l.id === id);
  if (!limiter) throw new Error(`no limiter ${id}`);
  let sent = 0;
  const lane = async () => {
    while (sent < CHECKS) {
      sent++;
      await limiter.check('hot');
    }
  };
  // warm-up, then the measured part under V8's CPU profiler (what --cpu-prof
  // runs, started and stopped here so the profile holds the measured checks only)
  await Promise.all(Array.from({ length: concurrency }, lane));
  sent = 0;
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
    );
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 100 });
  await post('Profiler.start');
  const started = process.cpuUsage();
  await Promise.all(Array.from({ length: concurrency }, lane));
  const cpu = process.cpuUsage(started);
  const { profile } = (await post('Profiler.stop')) as { profile: CpuProfile };
  writeFileSync(profileFile, JSON.stringify(profile));
  session.disconnect();
  process.stdout.write(`${JSON.stringify({ cpuUsPerCheck: (cpu.user + cpu.system) / CHECKS })}\n`);
  plain.disconnect();
  ours.disconnect();
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Which part of the stack a frame belongs to. */
function partOf(url: string, name: string): string {
  if (name === '(garbage collector)') return 'GC';
  if (name === '(program)' || name === '(idle)') return name;
  if (url.includes('/layer/src/')) return 'the layer (limiter, contract, decision)';
  if (url.includes('node_modules/ioredis') || url.includes('node_modules/redis-parser'))
    return 'ioredis (command, parser)';
  if (url.includes('node_modules/')) return `other packages (${/node_modules\/([^/]+)/.exec(url)?.[1]})`;
  if (url.startsWith('node:')) return `Node (${url.replace(/^node:internal\//, '').split('/')[0]})`;
  if (url.includes('/bench/')) return 'the benchmark loop';
  return url === '' ? 'native / runtime' : 'other';
}

/** Self time (µs per check) by function and by part. */
function summarise(profile: CpuProfile, checks: number) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i] as number;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const byFunction = new Map<string, number>();
  const byPart = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = (byId.get(id) as ProfileNode).callFrame;
    const file = url.split('/').slice(-2).join('/');
    const name = `${functionName || '(anonymous)'} ${file ? `${file}:${lineNumber + 1}` : ''}`.trim();
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    const part = partOf(url, functionName);
    byPart.set(part, (byPart.get(part) ?? 0) + us);
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { byFunction: sorted(byFunction), byPart: sorted(byPart), perCheck: (us: number) => us / checks };
}

if (process.argv[2] === '--child') {
  await child(process.argv[3] as string, process.argv[4] as string, Number(process.argv[5]), process.argv[6] as string);
} else {
  const canPin = pinnedToCpu0();
  const server = await startRedis(canPin ? { cpu: 1 } : {});
  const stamp = new Date().toISOString().replace(/:/g, '-').slice(0, 19);
  const dir = join(OUT, `profile-${stamp}`);
  mkdirSync(dir, { recursive: true });
  const lines = [
    `# Where the client's CPU goes in a check (${new Date().toISOString()})`,
    '',
    `${CHECKS} checks per run on a hot key after as many to warm up, ${canPin ? 'client pinned to CPU 0, Redis to CPU 1' : 'unpinned'}; self time from V8's CPU profiler (100 µs sampling) over the measured checks, in µs per check (sampling: approximate; the process CPU per check beside it is exact).`,
    '',
  ];
  try {
    for (const concurrency of [128, 1]) {
      for (const id of ['reference-tb', 'ours-tb']) {
        const profileFile = join(dir, `${id}-c${concurrency}.cpuprofile`);
        const result = spawnSync(
          process.execPath,
          [new URL(import.meta.url).pathname, '--child', server.url, id, String(concurrency), profileFile],
          { encoding: 'utf8', env: { ...process.env, BENCH_PINNED: '1' } },
        );
        if (result.status !== 0) throw new Error(`profile of ${id} failed: ${result.stderr}`);
        const { cpuUsPerCheck } = JSON.parse(result.stdout.trim().split('\n').pop() as string) as {
          cpuUsPerCheck: number;
        };
        const profile = JSON.parse(readFileSync(profileFile, 'utf8')) as CpuProfile;
        const { byFunction, byPart, perCheck } = summarise(profile, CHECKS);
        lines.push(
          `## ${id}, c=${concurrency}: ${cpuUsPerCheck.toFixed(1)} µs CPU per check`,
          '',
          '| part | µs/check |',
          '|---|---|',
          ...byPart
            .filter(([, us]) => perCheck(us) >= 0.05)
            .map(([part, us]) => `| ${part} | ${perCheck(us).toFixed(2)} |`),
          '',
          '| function (self time, top 20) | µs/check |',
          '|---|---|',
          ...byFunction.slice(0, 20).map(([name, us]) => `| \`${name}\` | ${perCheck(us).toFixed(2)} |`),
          '',
        );
      }
    }
  } finally {
    await server.stop();
  }
  writeFileSync(`${dir}.md`, `${lines.join('\n')}\n`);
  console.log(`${lines.join('\n')}\nwritten to ${dir}.md`);
}
