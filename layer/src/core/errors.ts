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

/**
 * A check asked with a bad key, cost or scope: what the request brought is
 * wrong (an HTTP caller gets a 400). Nothing was sent to Redis.
 */
export class InvalidCheckError extends RateLimitError {
  override name = 'InvalidCheckError';
}

/**
 * A check the code or configuration got wrong, whatever the request: an
 * unknown policy, limits of different groups together, a grouped policy
 * without a scope, too many limits. The middleware logs it once and answers
 * by the failure mode. Nothing was sent to Redis.
 */
export class MisconfiguredCheckError extends InvalidCheckError {
  override name = 'MisconfiguredCheckError';
}

/** An environment setting that cannot be used: a clear error at startup, never a silent default. */
export class InvalidSettingError extends RateLimitError {
  override name = 'InvalidSettingError';
  readonly setting: string;
  constructor(setting: string, reason: string) {
    super(`invalid setting ${setting}: ${reason}`);
    this.setting = setting;
  }
}
