/** Loaded on first use: node:fs/promises costs a cold start ~3 ms, and a deployed function reads SSM, not a file. */
const fsPromises = () => import('node:fs/promises');

import type { ParameterSource, ParameterWriter } from './parameter-source.ts';

/**
 * Parameters from a JSON file: `{ "<full parameter name>": value }`, where a
 * value is the parameter's text or, for readability, the JSON it holds.
 * Read again on every fetch, so editing the file changes a running platform.
 */
export class FileParameterSource implements ParameterSource, ParameterWriter {
  readonly #file: string | URL;

  constructor(file: string | URL) {
    this.#file = file;
  }

  async fetchAll(path: string): Promise<Record<string, string>> {
    const parsed = JSON.parse(await (await fsPromises()).readFile(this.#file, 'utf8')) as unknown;
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

  /** Replaces one parameter in the file (a JSON value kept as JSON, for readability); written whole, then renamed. */
  async put(name: string, value: string): Promise<void> {
    const parsed = JSON.parse(await (await fsPromises()).readFile(this.#file, 'utf8')) as Record<string, unknown>;
    let stored: unknown = value;
    try {
      stored = JSON.parse(value);
    } catch {
      // a plain string parameter
    }
    parsed[name] = stored;
    const path = typeof this.#file === 'string' ? this.#file : this.#file.pathname;
    const { rename, writeFile } = await fsPromises();
    await writeFile(`${path}.tmp`, `${JSON.stringify(parsed, null, 2)}\n`);
    await rename(`${path}.tmp`, path);
  }
}
