/**
 * What the multi-region tests share: running region workers
 * (./region-worker.ts) as OS processes on one schedule, and reading the
 * admissions back as windows.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const WORKER = new URL('./region-worker.ts', import.meta.url).pathname;

export interface WorkerInput {
  readonly env: Record<string, string>;
  readonly catalogue: Record<string, unknown>;
  readonly policy: string;
  readonly key: string;
  /** [fromMs, toMs) spans after the start in which it floods. */
  readonly active: readonly (readonly [number, number])[];
}

export interface WorkerResult {
  readonly admitted: number[];
  readonly refused: number;
  readonly degraded: number;
}

/**
 * Starts every worker, waits until all are connected-ready, then gives them
 * one start time; `during(start)` runs beside them (a partition, the
 * rebalancers). Resolves with each worker's result.
 */
export async function runWorkers(
  inputs: readonly WorkerInput[],
  during: (startMs: number) => Promise<void>,
): Promise<WorkerResult[]> {
  const workers = inputs.map((input) => {
    const child = spawn(process.execPath, [WORKER, JSON.stringify(input)], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout });
    const ready = new Promise<void>((resolve, reject) => {
      lines.once('line', (line) => (line === 'ready' ? resolve() : reject(new Error(`worker said ${line}`))));
      child.once('exit', (code) => reject(new Error(`worker exited with ${code} before ready`)));
    });
    const result = ready.then(
      () =>
        new Promise<WorkerResult>((resolve, reject) => {
          lines.once('line', (line) => resolve(JSON.parse(line) as WorkerResult));
          child.once('exit', (code) => reject(new Error(`worker exited with ${code} without a result`)));
        }),
    );
    ready.catch(() => {}); // surfaced through `result` and the await below
    return { child, ready, result };
  });
  try {
    await Promise.all(workers.map((w) => w.ready));
  } catch (error) {
    for (const w of workers) w.child.kill();
    throw error;
  }
  const start = Date.now() + 200; // every worker reads the start before it comes
  for (const w of workers) w.child.stdin?.write(`${start}\n`);
  const [results] = await Promise.all([Promise.all(workers.map((w) => w.result)), during(start)]);
  return results;
}

/** The most admissions in any window of `windowUs` (events at t count in (t - window, t]). */
export function mostInAnyWindow(times: readonly number[], windowUs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let from = 0;
  for (let i = 0; i < sorted.length; i++) {
    while ((sorted[from] as number) <= (sorted[i] as number) - windowUs) from++;
    most = Math.max(most, i - from + 1);
  }
  return most;
}

/** Mean of `limit - admissions in the window ending at t`, over t every ms in [fromUs, toUs): capacity left unused. */
export function meanUnused(times: readonly number[], windowUs: number, limit: number, fromUs: number, toUs: number) {
  const sorted = [...times].sort((a, b) => a - b);
  let lo = 0;
  let hi = 0;
  let sum = 0;
  let samples = 0;
  for (let t = fromUs; t < toUs; t += 1000) {
    while (hi < sorted.length && (sorted[hi] as number) <= t) hi++;
    while (lo < hi && (sorted[lo] as number) <= t - windowUs) lo++;
    sum += limit - (hi - lo);
    samples++;
  }
  return samples === 0 ? 0 : sum / samples;
}
