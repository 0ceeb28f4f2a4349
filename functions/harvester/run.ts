/**
 * A local harvesting worker process:
 *   node functions/harvester/run.ts --source http://127.0.0.1:4100 --site site-1 [--seconds 30]
 * Runs until --seconds have passed or SIGTERM, then prints its report as one
 * JSON line. Start several for one site: they share the pace through Redis.
 */
import { parseArgs } from 'node:util';
import { closePlatform } from '../shared/platform.ts';
import { runHarvest } from './job.ts';

const { values } = parseArgs({
  options: { source: { type: 'string' }, site: { type: 'string' }, seconds: { type: 'string' } },
});
const seconds = values.seconds === undefined ? Number.POSITIVE_INFINITY : Number(values.seconds);
if (!values.source || !values.site || !(seconds > 0)) {
  console.error('usage: node functions/harvester/run.ts --source <url> --site <site> [--seconds <n>]');
  process.exit(2);
}
const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());
const report = await runHarvest({
  source: values.source,
  site: values.site,
  until: Date.now() + seconds * 1000,
  stop: stop.signal,
});
console.log(JSON.stringify(report));
closePlatform();
