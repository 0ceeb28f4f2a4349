/**
 * "Add a route" (docs/architecture.md) is closed and true: a route added from
 * a fixture (test/fixtures/add-route/: a route and its one new policy) is
 * taken by everything the route table feeds, and every file outside a route's
 * folder that lists every route (a list a new route would have to join) is
 * one the recipe names. A new such list fails here, naming the file. The
 * docs' tables rendered with it change one generated page (docs/catalogue.md),
 * prod reserves it by its stage file's default, and docs/deploy.md's cost table
 * names no total a route would change: four files touched, three written.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { compilePolicies } from '@platform/rate-limit';
import { readOuterLine, routeThrottleOf } from '../../config/outer-line.ts';
import catalogue from '../../config/policies.json' with { type: 'json' };
import { checksOf, type Route, routes } from '../../functions/routes.ts';
import { DEFAULT_RESERVATION, reservedConcurrencyFor } from '../../infra/context.ts';
import prod from '../../infra/stages/prod.json' with { type: 'json' };
import { CATALOGUE, GENERATED_TABLES } from '../../scripts/catalogue-table.ts';
import { renderNginxConf } from '../../scripts/nginx-conf.ts';
import fixturePolicies from '../fixtures/add-route/policies.json' with { type: 'json' };
import { route as ping } from '../fixtures/add-route/route.ts';
import { sampleRequest } from '../support/route-sample.ts';

const ROOT = new URL('../../', import.meta.url);
const RECIPE = new URL('docs/architecture.md', ROOT);

/** The recipe's files (required and optional) as patterns: `<consumer>`, `<stage>` stand for any name. */
function recipeFiles(): { required: string[]; all: RegExp[] } {
  const text = readFileSync(RECIPE, 'utf8');
  const begin = text.indexOf('<!-- add-route:files');
  const end = text.indexOf('<!-- add-route:end -->');
  assert.ok(begin > 0 && end > begin, 'docs/architecture.md keeps its add-route:files markers');
  const section = text.slice(begin, end);
  const pathsIn = (part: string) =>
    [...part.matchAll(/`([a-z][\w./<>-]*\/[\w./<>-]*\.(?:ts|json))`/g)].map((m) => m[1] as string);
  const numbered = section.split('\n').filter((line) => /^\d+\. `/.test(line));
  const required = numbered.map((line) => pathsIn(line)[0] as string);
  const all = [...new Set(pathsIn(section))].map(
    (path) => new RegExp(`^${path.replaceAll('.', '\\.').replaceAll(/<[a-z]+>/g, '[\\w-]+')}$`),
  );
  return { required, all };
}

/** Whether a file's text names a route: its id as a key or string, its path, its handler or its folder. */
function names(text: string, route: Route): boolean {
  const literal = (s: string) => s.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(
    [
      `['"\`]${route.id}['"\`]`,
      `\\b${route.id}:`,
      literal(route.path),
      literal(route.handler.replace(/\.ts$/, '')),
      `\\./${route.id}/route`,
    ].join('|'),
  ).test(text);
}

describe('Adding a route (docs/architecture.md, "Add a route")', () => {
  const table: readonly Route[] = [...routes, ping];
  const line = readOuterLine();

  it('asks for three files written by hand for a route with one new policy', () => {
    const { required } = recipeFiles();
    assert.deepEqual(required, [
      'config/policies.json',
      'functions/<consumer>/route.ts',
      'functions/<consumer>/handler.ts',
    ]);
  });

  it('takes the route table from the folders: every functions/<id>/route.ts, each checked by the compiler', () => {
    const folders = readdirSync(new URL('functions/', ROOT), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && existsSync(new URL(`functions/${entry.name}/route.ts`, ROOT)))
      .map((entry) => entry.name);
    assert.deepEqual(
      routes.map((route) => route.id),
      [...folders].sort(),
    );
    for (const route of routes) {
      assert.equal(route.handler, `${route.id}/handler.ts`);
      const text = readFileSync(new URL(`functions/${route.id}/route.ts`, ROOT), 'utf8');
      assert.match(
        text,
        /\} as const satisfies Route;/,
        `functions/${route.id}/route.ts declares its route as a Route`,
      );
    }
  });

  it('names every file outside a route folder that lists every route (a list a new route must join)', () => {
    const { all } = recipeFiles();
    const tracked = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((file) => /\.(ts|json|lua|conf|ya?ml)$/.test(file) && !/^(test|bench|docs)\//.test(file))
      .filter((file) => !file.endsWith('package-lock.json'))
      .filter((file) => !routes.some((route) => file.startsWith(`functions/${route.id}/`)));
    const lists = tracked.filter((file) => {
      const text = readFileSync(new URL(file, ROOT), 'utf8');
      return routes.every((route) => names(text, route));
    });
    assert.ok(lists.includes('infra/stages/prod.json'), "the scan finds a list (prod's reservations name every route)");
    assert.ok(!lists.includes('functions/routes.ts'), 'the route table names no route: it is the folders');
    const unnamed = lists.filter((file) => !all.some((pattern) => pattern.test(file)));
    assert.deepEqual(
      unnamed,
      [],
      'these files list every route: derive them from functions/routes.ts, or name them in docs/architecture.md ("Add a route")',
    );
  });

  it('gives the new route a throttle of its own from config/outer-line.json without an entry there', () => {
    assert.equal(line.routeThrottles?.[ping.id], undefined);
    assert.deepEqual(routeThrottleOf(line, ping.id), line.defaultRouteThrottle);
    assert.ok(line.defaultRouteThrottle, 'config/outer-line.json has a defaultRouteThrottle');
    // a route given one keeps its own
    for (const [id, throttle] of Object.entries(line.routeThrottles ?? {})) {
      assert.deepEqual(routeThrottleOf(line, id), throttle);
    }
  });

  it("renders the new route into nginx's configuration (npm run nginx:conf) with its own zone and location", () => {
    const conf = renderNginxConf(line, { listen: 8080, gateway: 3000 }, table);
    assert.match(conf, /limit_req_zone route_ping zone=route_ping:1m rate=200r\/s;/);
    assert.match(conf, /location = \/ping \{\n\s+limit_req zone=route_ping burst=400 nodelay;/);
  });

  it("builds the metric test's request for it from its declaration", () => {
    assert.deepEqual(sampleRequest(ping), { method: 'GET', path: '/ping', headers: {} });
    const api = routes.find((route) => route.id === 'api');
    assert.ok(api);
    const sample = sampleRequest(api);
    assert.equal(sample.path, '/v1/sample');
    assert.match(Object.values(sample.headers)[0] ?? '', /^rk_/, 'a route limited by API key is sent one');
  });

  it("is reserved in prod by the stage file's default, without an entry there", () => {
    const reserved: Record<string, number> = prod.reservedConcurrency;
    assert.equal(reserved[ping.id], undefined);
    assert.ok(reserved[DEFAULT_RESERVATION], 'infra/stages/prod.json reserves a default');
    assert.equal(reservedConcurrencyFor(reserved, ping.id), reserved[DEFAULT_RESERVATION]);
  });

  it("leaves docs/deploy.md's cost table true: alarms counted per function and per policy, not in all", () => {
    const deploy = readFileSync(new URL('docs/deploy.md', ROOT), 'utf8');
    assert.doesNotMatch(deploy, /\b\d+ alarms\b/, 'a total of alarms grows with every route');
    assert.match(deploy, /alarms: 2 a function, 1–2 more a route, 1–2 a policy, \d+ for the stage/);
  });

  it('regenerates one docs file (docs/catalogue.md): four files touched in all, three of them written', () => {
    const added = { policies: compilePolicies({ ...catalogue, ...fixturePolicies }), routes: table };
    const regenerated = [
      ...new Set(
        GENERATED_TABLES.filter((t) => JSON.stringify(t.rows(added)) !== JSON.stringify(t.rows(CATALOGUE))).map((t) =>
          t.doc.pathname.slice(ROOT.pathname.length),
        ),
      ),
    ];
    assert.deepEqual(regenerated, ['docs/catalogue.md']);
    const recipe = readFileSync(RECIPE, 'utf8');
    assert.ok(recipe.includes('`docs/catalogue.md`'), 'the recipe names the page it regenerates');
    assert.equal([...recipeFiles().required, ...regenerated].length, 4);
  });

  it('compiles its new policy beside the catalogue, and the alarms see its check', () => {
    const compiled = compilePolicies({ ...catalogue, ...fixturePolicies });
    assert.equal(compiled.get('ping-ip')?.strategy, 'slidingWindow');
    assert.deepEqual(checksOf(ping), [['ping-ip']]);
  });
});
