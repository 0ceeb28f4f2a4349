/**
 * How Lambda runs the consumer functions' Node: their memory, and the V8 flags
 * its Node.js runtime starts Node with for that memory. The layer's V8 code
 * cache is made under these flags at build (scripts/bundle.ts), since V8
 * rejects a cache made under other flags.
 */

/** Every consumer function's memory (infra/consumer-function.ts). */
export const FUNCTION_MEMORY_MB = 512;

/**
 * The V8 flags of the runtime's bootstrap (`node --expose-gc
 * --max-http-header-size 81920 --max-semi-space-size=<new space / 2>
 * --max-old-space-size=<memory − new space>`, the new space a tenth of the
 * memory); `--max-http-header-size` is Node's, not V8's. If the runtime
 * changes them, V8 rejects the cache: the init then costs what it did without
 * one, and the function logs it once (vendor/ioredis.mjs).
 */
export function lambdaV8Flags(memoryMb: number = FUNCTION_MEMORY_MB): string[] {
  const newSpace = Math.floor(memoryMb / 10);
  return [
    '--expose-gc',
    `--max-semi-space-size=${Math.floor(newSpace / 2)}`,
    `--max-old-space-size=${memoryMb - newSpace}`,
  ];
}
