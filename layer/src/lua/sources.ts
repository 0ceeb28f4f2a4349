import { readFileSync } from 'node:fs';

/**
 * The text of one Lua fragment, by its path without `.lua`, from the package
 * `@platform/rate-limit-lua` (the repository's `lua/`). In the built layer
 * this module is replaced by one with every fragment inlined (see
 * scripts/bundle.ts), so a cold start reads no file.
 */
export function readLua(fragment: string): string {
  return readFileSync(new URL(import.meta.resolve(`@platform/rate-limit-lua/${fragment}.lua`)), 'utf8');
}
