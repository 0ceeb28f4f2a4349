import type { Route } from '../route.ts';

export const route = {
  id: 'llm',
  methods: ['POST'],
  path: '/v1/llm/complete',
  handler: 'llm/handler.ts',
  rawBody: false,
  limits: [],
  uses: ['apiKeyRegistry', 'llmProvider'],
  secrets: [],
  inHandler: [['llm-in-flight', 'llm-budget'], ['api-unknown-key-ip']],
} as const satisfies Route;
