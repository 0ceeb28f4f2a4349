import type { Route } from '../route.ts';

export const route = {
  id: 'slack',
  methods: ['POST'],
  path: '/webhooks/slack',
  handler: 'slack/handler.ts',
  rawBody: true,
  // the per-IP window counts only requests failing verification (the handler, refuseUnverified)
  limits: [],
  uses: ['eventQueue'],
  secrets: ['slack-signing-secret'],
  inHandler: [['slack-workspace', 'slack-channel'], ['slack-ip']],
} as const satisfies Route;
