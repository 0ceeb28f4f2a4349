import { Session } from 'node:inspector';
import { createRedisClient } from '@platform/rate-limit';
import { productionScripts } from '@platform/rate-limit/lua';
import { Redis } from 'ioredis';
import { startRedis } from '../scripts/redis-process.ts';
import { benchLimiters } from './limiters.ts';

const server = await startRedis({ cpu: 1 });
const bucket = productionScripts().entries.check_token_bucket!;
const admin = new Redis(server.url);
await admin.script('LOAD', bucket.source);
const fns: ((k: string) => Promise<unknown>)[] = [];
const row = process.env.ROW ?? 'check';
for (let c = 0; c < 64; c++) {
  const ours = createRedisClient({ url: server.url });
  await ours.connect();
  const plain = new Redis(server.url);
  const ls = await benchLimiters(ours, plain);
  fns.push(
    row === 'bare'
      ? async (key) => ((await ours.evalsha(bucket.sha, 1, `rl:{bench-tb:${key}}`, '1000', '1000')) as number) >= 0
      : row === 'ref'
        ? ls.find((l) => l.id === 'reference-tb')!.check
        : ls.find((l) => l.id === 'ours-tb')!.check,
  );
}
let n = 0;
const drive = async (ms: number) => {
  const until = performance.now() + ms;
  await Promise.all(
    fns.map(async (f) => {
      while (performance.now() < until) {
        await f(`k${Math.floor(Math.random() * 100000)}`);
        n++;
      }
    }),
  );
};
await drive(1500);
n = 0;
const session = new Session();
session.connect();
const post = (m: string, p?: object) =>
  new Promise<any>((res, rej) => session.post(m, p, (e, r) => (e ? rej(e) : res(r))));
await post('Profiler.enable');
await post('Profiler.setSamplingInterval', { interval: 50 });
await post('Profiler.start');
const t = process.cpuUsage();
await drive(4000);
const u = process.cpuUsage(t);
const { profile } = await post('Profiler.stop');
const byId = new Map(profile.nodes.map((x: any) => [x.id, x]));
const self = new Map<string, number>();
const part = new Map<string, number>();
for (let i = 0; i < profile.samples.length; i++) {
  const x: any = byId.get(profile.samples[i]);
  const f = x.callFrame;
  const name = `${f.functionName || '(anon)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}`;
  const p = f.url.includes('/layer/src/')
    ? 'layer'
    : f.url.includes('ioredis') || f.url.includes('redis-parser')
      ? 'ioredis'
      : f.url.startsWith('node:')
        ? 'node'
        : f.url.includes('/bench/')
          ? 'bench'
          : f.functionName || 'native';
  self.set(name, (self.get(name) ?? 0) + profile.timeDeltas[i]);
  part.set(p, (part.get(p) ?? 0) + profile.timeDeltas[i]);
}
console.log(row, 'user', (u.user / n).toFixed(2), 'sys', (u.system / n).toFixed(2), 'checks', n);
for (const [k, v] of [...part].sort((a, b) => b[1] - a[1]).slice(0, 12))
  console.log((v / n).toFixed(2).padStart(6), 'µs', k);
console.log('--');
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 60))
  if (
    k.includes('layer/src') ||
    k.includes('redis/') ||
    k.includes('core/') ||
    k.includes('lua/') ||
    k.includes('policy/') ||
    k.includes('strategies/')
  )
    console.log((v / n).toFixed(3).padStart(7), 'µs', k);
process.exit(0);
