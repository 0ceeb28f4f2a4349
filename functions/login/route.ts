import type { Route } from '../route.ts';

export const route = {
  id: 'login',
  methods: ['POST'],
  path: '/auth/login',
  handler: 'login/handler.ts',
  rawBody: false,
  // one check, one hash slot: the /64 (or IPv4) window and the coarser /48 one
  limits: [
    { policy: 'login-ip', key: { from: 'clientIp' } },
    { policy: 'login-ip48', key: { from: 'clientIp48' } },
  ],
  scope: { from: 'clientIp48' },
  uses: ['userDirectory'],
  secrets: ['email-pepper', 'device-cookie-key'],
  // an untrusted attempt: the account-wide delay; one with a valid device cookie: that device's own
  inHandler: [['login-account'], ['login-device']],
} as const satisfies Route;
