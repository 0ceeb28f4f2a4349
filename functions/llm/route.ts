import type { Route } from '../route.ts';

export const route = {
  id: 'llm',
  methods: ['POST'],
  path: '/v1/llm/complete',
  handler: 'llm/handler.ts',
  rawBody: false,
  limits: [],
  uses: ['apiKeyRegistry'],
  secrets: ['api-key-pepper'],
  inHandler: [['llm-in-flight', 'llm-budget'], ['api-unknown-key-ip']],
  reservedConcurrency: 20,
} as const satisfies Route;
