import type { Route } from '../route.ts';

export const route = {
  id: 'llm',
  methods: ['POST'],
  path: '/v1/llm/complete',
  handler: 'llm/handler.ts',
  rawBody: false,
  limits: [],
  uses: ['apiKeyRegistry', 'llmProvider'],
  secrets: ['api-key-pepper'],
  inHandler: [['llm-in-flight', 'llm-budget'], ['api-unknown-key-ip']],
  // above the largest call's worst case (docs/llm-budget.md, "How long a call may run"); llm-in-flight's leaseTtl is above it
  timeoutSeconds: 90,
} as const satisfies Route;
