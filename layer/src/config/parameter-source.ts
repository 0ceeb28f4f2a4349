/**
 * Where policy parameters come from: SSM Parameter Store in production, a
 * JSON file locally and in tests. Both answer with the same names and values.
 */
export interface ParameterSource {
  /**
   * Every parameter under `path` (recursively), by full name, values as
   * stored (SecureStrings decrypted). Throws when the store cannot be read;
   * the caller keeps what it had.
   */
  fetchAll(path: string): Promise<Record<string, string>>;
}

/** Where an operator's override is written: the same names the source reads. */
export interface ParameterWriter {
  /** Writes (or replaces) one parameter; `value` is its text (JSON for a policy). */
  put(name: string, value: string): Promise<void>;
}
