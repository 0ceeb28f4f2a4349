/**
 * A CommonJS bundle (the layer's ioredis) run with a V8 code cache made for
 * it at build time, after the module ran: the functions its evaluation
 * compiled are in the cache too, which Node's own compile cache (made before
 * a module runs, keyed by absolute path) leaves out.
 *
 * V8 accepts a cache only from its own version and the same V8 flags (Lambda
 * starts Node with heap flags), and checks the source by its length alone. So
 * each cache is stamped with the Node and V8 versions, the architecture, the
 * source's SHA-256 and the V8 flags it was made under, and is named by those
 * flags; a cache
 * that does not match is not read, and one V8 rejects costs only the compile
 * it would have cost without it. Never a failed load.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Script } from 'node:vm';

/** What became of the cache at load: used, refused by V8, or not read (none for this Node, these flags or this source; or switched off). */
export type CodeCacheOutcome = 'accepted' | 'rejected' | 'absent' | 'stale' | 'off';

export interface CodeCacheStamp {
  readonly node: string;
  readonly v8: string;
  /** V8's code is per architecture: a cache built on x64 is not read on Lambda's arm64. */
  readonly arch: string;
  readonly sourceSha256: string;
  /** V8 checks a cache's header, not its bytes: a damaged cache it accepts can abort the process. */
  readonly cacheSha256: string;
  readonly v8Flags: readonly string[];
}

/**
 * The V8 flags of this process that change V8's flag hash, as the cache is
 * keyed: Node's own options (`--import`, `--input-type`, `-e` and its code,
 * `--max-http-header-size` …) do not reach V8. Flags through NODE_OPTIONS are
 * not in execArgv: the build makes its caches without NODE_OPTIONS
 * (scripts/bundle.ts), and a process started with V8 flags there finds its
 * cache rejected (costs time only).
 */
const V8_FLAG =
  /^--(expose[-_]gc|max[-_]semi[-_]space[-_]size=|max[-_]old[-_]space[-_]size=|stack[-_]size=|no[-_]opt$|jitless$)/;

export function v8FlagsOf(execArgv: readonly string[]): string[] {
  return execArgv.filter((arg) => V8_FLAG.test(arg)).sort();
}

/** The cache file for `flags`, next to the bundle: `<file>.<flags' digest>.v8cache` (`<file>.v8cache` with none). */
export function cacheFileOf(file: string, flags: readonly string[]): string {
  if (flags.length === 0) return `${file}.v8cache`;
  return `${file}.${createHash('sha256').update(flags.join(' ')).digest('hex').slice(0, 12)}.v8cache`;
}

const stampOf = (cacheFile: string) => `${cacheFile}.json`;

// The wrapper Node gives a CommonJS file; the bundle only requires built-ins.
const wrap = (source: string) => `(function (exports, require, module, __filename, __dirname) {${source}\n})`;

function evaluate(file: string, script: Script): unknown {
  const module = { exports: {} as unknown };
  (script.runInThisContext() as (...args: unknown[]) => void)(
    module.exports,
    createRequire(file),
    module,
    file,
    file.slice(0, file.lastIndexOf('/')),
  );
  return module.exports;
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

function readCache(file: string, source: string, flags: readonly string[]): Buffer | 'absent' | 'stale' {
  const cacheFile = cacheFileOf(file, flags);
  let stamp: Partial<CodeCacheStamp> | null;
  try {
    stamp = JSON.parse(readFileSync(stampOf(cacheFile), 'utf8')) as Partial<CodeCacheStamp> | null;
  } catch {
    return 'absent';
  }
  // V8 compares the source by length only: the digest keeps a cache from another build of the same length out.
  if (
    stamp === null ||
    typeof stamp !== 'object' ||
    stamp.node !== process.version ||
    stamp.v8 !== process.versions.v8 ||
    stamp.arch !== process.arch ||
    !Array.isArray(stamp.v8Flags) ||
    stamp.v8Flags.join(' ') !== flags.join(' ') ||
    stamp.sourceSha256 !== sha256(source)
  )
    return 'stale';
  let cache: Buffer;
  try {
    cache = readFileSync(cacheFile);
  } catch {
    return 'absent';
  }
  // a damaged cache (a torn copy, a bad disk) is not read: V8 would take some of them and abort later
  return stamp.cacheSha256 === sha256(cache) ? cache : 'stale';
}

/** Runs the CommonJS bundle `file` with its cache for this process's V8 flags, if it has one that matches. */
export function runWithCodeCache(
  file: string,
  { execArgv = process.execArgv, off = false }: { execArgv?: readonly string[]; off?: boolean } = {},
): { exports: unknown; outcome: CodeCacheOutcome } {
  const source = readFileSync(file, 'utf8');
  const cached = off ? 'off' : readCache(file, source, v8FlagsOf(execArgv));
  const cachedData = typeof cached === 'string' ? undefined : cached;
  const script = new Script(wrap(source), { filename: file, ...(cachedData ? { cachedData } : {}) });
  const exports = evaluate(file, script);
  const outcome: CodeCacheOutcome =
    typeof cached === 'string' ? cached : script.cachedDataRejected ? 'rejected' : 'accepted';
  return { exports, outcome };
}

/**
 * Build time: runs `file` once (then `warm`, e.g. constructing a client
 * without connecting, so its constructors are compiled too) and writes the
 * code cache V8 makes then, for this process's V8 flags, with its stamp.
 */
export function produceCodeCache(file: string, warm?: (exports: unknown) => void): string {
  const source = readFileSync(file, 'utf8');
  const script = new Script(wrap(source), { filename: file });
  const exports = evaluate(file, script);
  warm?.(exports);
  const flags = v8FlagsOf(process.execArgv);
  const cacheFile = cacheFileOf(file, flags);
  const cache = script.createCachedData();
  writeFileSync(cacheFile, cache);
  const stamp: CodeCacheStamp = {
    node: process.version,
    v8: process.versions.v8,
    arch: process.arch,
    sourceSha256: sha256(source),
    cacheSha256: sha256(cache),
    v8Flags: flags,
  };
  writeFileSync(stampOf(cacheFile), `${JSON.stringify(stamp, null, 2)}\n`);
  return cacheFile;
}
