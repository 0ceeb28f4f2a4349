import { readFile } from 'node:fs/promises';
import type { ParameterSource } from './parameter-source.ts';

/**
 * Parameters from a JSON file: `{ "<full parameter name>": value }`, where a
 * value is the parameter's text or, for readability, the JSON it holds.
 * Read again on every fetch, so editing the file changes a running platform.
 */
export class FileParameterSource implements ParameterSource {
  readonly #file: string | URL;

  constructor(file: string | URL) {
    this.#file = file;
  }

  async fetchAll(path: string): Promise<Record<string, string>> {
    const parsed = JSON.parse(await readFile(this.#file, 'utf8')) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new TypeError(`${String(this.#file)} must hold one JSON object of parameters`);
    }
    const prefix = path.endsWith('/') ? path : `${path}/`;
    const parameters: Record<string, string> = {};
    for (const [name, value] of Object.entries(parsed)) {
      if (name.startsWith(prefix)) parameters[name] = typeof value === 'string' ? value : JSON.stringify(value);
    }
    return parameters;
  }
}
