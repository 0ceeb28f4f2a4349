import type { Route } from '../route.ts';

export const route = {
  id: 'telegram',
  methods: ['POST'],
  path: '/webhooks/telegram/{bot}',
  handler: 'telegram/handler.ts',
  rawBody: true,
  // the per-IP window counts only requests failing verification (the handler, refuseUnverified)
  limits: [],
  uses: ['eventQueue'],
  secrets: ['telegram-bot-*'],
  inHandler: [['telegram-bot', 'telegram-chat'], ['telegram-ip']],
} as const satisfies Route;
