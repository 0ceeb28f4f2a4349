/**
 * Errors of the rate-limit layer. Over-limit is never an error: it is a
 * `Decision`. These are raised for bad input (the caller's bug or bad
 * configuration) and carry the layer's name so a log line says who threw.
 */
export class RateLimitError extends Error {
  override name = 'RateLimitError';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** A policy (from code or configuration) that breaks the schema. */
export class InvalidPolicyError extends RateLimitError {
  override name = 'InvalidPolicyError';
  readonly policy: string;
  readonly reason: string;
  constructor(policy: string, reason: string) {
    super(`invalid rate-limit policy "${policy}": ${reason}`);
    this.policy = policy;
    this.reason = reason;
  }
}

/** A check asked with a bad key, cost or policy name: nothing was sent to Redis. */
export class InvalidCheckError extends RateLimitError {
  override name = 'InvalidCheckError';
}
