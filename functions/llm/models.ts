/**
 * The models the LLM route offers (config/llm-models.json) and what their
 * tokens cost, in micro-dollars (µUSD, the budget's units). Prices are whole
 * µUSD per million tokens (= USD per 1M tokens × 10^6), so a cost is an exact
 * integer sum rounded up once.
 */
import * as v from 'valibot';
import config from '../../config/llm-models.json' with { type: 'json' };

/** What a call used, as Bedrock's Converse `usage` counts it (cache tokens are not in inputTokens). */
export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cacheReadInputTokens: number;
  readonly cacheWriteInputTokens: number;
}

export const NO_USAGE: Usage = { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheWriteInputTokens: 0 };

const price = v.pipe(v.number(), v.safeInteger(), v.minValue(0), v.maxValue(1e9));
const Model = v.strictObject({
  /** The Bedrock model id the deployed route calls (the infra grants bedrock:InvokeModel on it, and nothing else). */
  bedrockModelId: v.pipe(v.string(), v.regex(/^[a-z0-9-]+\.[A-Za-z0-9.:-]+$/)),
  /** The largest max_tokens a call may ask (bounds its cost and its duration). */
  maxTokens: v.pipe(v.number(), v.safeInteger(), v.minValue(1), v.maxValue(100_000)),
  /** Tokens the model's prompt template adds around the prompt (roles, markers): part of the estimate. */
  promptOverheadTokens: v.pipe(v.number(), v.safeInteger(), v.minValue(0), v.maxValue(10_000)),
  microUsdPerMillionTokens: v.strictObject({ input: price, output: price, cacheRead: price, cacheWrite: price }),
  /** Where the prices come from, and when they were read. */
  pricesFrom: v.pipe(v.string(), v.minLength(1)),
});
export type ModelEntry = v.InferOutput<typeof Model>;

/** The configured models, validated once (a malformed file fails the cold start, not a call). */
export const MODELS: Readonly<Record<string, ModelEntry>> = Object.freeze(
  v.parse(v.record(v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9.-]{0,63}$/)), Model), config),
);

/** µUSD of a usage, rounded up to a whole one. */
export function costOf(model: ModelEntry, usage: Usage): number {
  const p = model.microUsdPerMillionTokens;
  const picoUsd =
    usage.inputTokens * p.input +
    usage.outputTokens * p.output +
    usage.cacheReadInputTokens * p.cacheRead +
    usage.cacheWriteInputTokens * p.cacheWrite;
  return Math.ceil(picoUsd / 1_000_000);
}

/**
 * An upper bound of the prompt's input tokens for any tokenizer: its UTF-8
 * bytes (every token of a byte-level tokenizer covers at least one byte)
 * plus the model's template overhead. Characters ÷ 4 under-counts CJK text
 * and emoji several times over; bytes never do.
 */
export function promptTokenBound(model: ModelEntry, prompt: string): number {
  return Buffer.byteLength(prompt, 'utf8') + model.promptOverheadTokens;
}

/**
 * The reservation: the dearest the call can be. Every input token priced at
 * the dearest input rate (plain, cache read or cache write: the provider
 * decides which), and the output at max_tokens (the provider never produces
 * more: it is sent as the call's own limit). A usage the provider reports
 * beyond it is still settled at its actual cost.
 */
export function reservationOf(model: ModelEntry, prompt: string, maxTokens: number): number {
  const p = model.microUsdPerMillionTokens;
  const dearestInput = Math.max(p.input, p.cacheRead, p.cacheWrite);
  return Math.ceil((promptTokenBound(model, prompt) * dearestInput + maxTokens * p.output) / 1_000_000);
}
