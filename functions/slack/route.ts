import type { Route } from '../route.ts';

export const route = {
  id: 'slack',
  methods: ['POST'],
  path: '/webhooks/slack',
  handler: 'slack/handler.ts',
  rawBody: true,
  limits: [{ policy: 'slack-ip', key: { from: 'clientIp' } }],
  uses: ['eventQueue'],
  secrets: ['slack-signing-secret'],
  inHandler: [['slack-workspace', 'slack-channel']],
} as const satisfies Route;
