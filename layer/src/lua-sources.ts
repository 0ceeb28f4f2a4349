import { readFileSync } from 'node:fs';

/**
 * The text of one Lua fragment of `lua/`, by its path without `.lua`.
 * From source it is read from the repository; in a bundle (the Lambda layer)
 * this module is replaced by one with every fragment inlined (see
 * scripts/bundle.ts), so a cold start reads no files.
 */
export function readLua(fragment: string): string {
  return readFileSync(new URL(`../../lua/${fragment}.lua`, import.meta.url), 'utf8');
}
