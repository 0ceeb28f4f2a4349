/** The HTTP client of the tests: scripts/http-client.ts (the demo uses it too). */
export * from '../../scripts/http-client.ts';
