// lib.mjs: shared helpers of the browser tests. The Go test
// (../e2e_test.go) starts dsh serve and the fake model, then runs one
// scenario script with node; the script drives headless Chromium through
// Playwright and exits non-zero on the first failed expectation.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const env = process.env;
const require = createRequire(join(env.PLAYWRIGHT_DIR, 'noop.js'));
const { chromium } = require('playwright-core');

export const URL_WITH_TOKEN = env.DSH_URL; // http://127.0.0.1:PORT/?token=…
export const BASE = new URL(env.DSH_URL).origin;
export const WORKSPACE = env.DSH_WORKSPACE;
const SCREENS = env.SCREENS_DIR;

/** fail ends the scenario with a message the Go test prints. */
export function fail(msg) {
  throw new Error(msg);
}

export function expect(cond, msg) {
  if (!cond) fail(msg);
}

/**
 * visibleSoon reports whether selector is visible within ms: for what one
 * of the page's two streams (the session's and the host feed) updates, which
 * need not have arrived when the other has.
 */
export async function visibleSoon(page, selector, ms = 15000) {
  try {
    await page.waitForSelector(selector, { state: 'visible', timeout: ms });
    return true;
  } catch {
    return false;
  }
}

const contexts = [];

/** launch starts Chromium with one page per scheme (light by default). */
export async function launch(opts = {}) {
  const browser = await chromium.launch({
    executablePath: env.CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 820 }, colorScheme: opts.colorScheme || 'light', deviceScaleFactor: 1 });
  // Any request to another origin is a failure: the UI must be self-contained.
  const foreign = [];
  context.on('request', (r) => { if (!r.url().startsWith(BASE) && !r.url().startsWith('data:')) foreign.push(r.url()); });
  const page = await context.newPage();
  contexts.push(context);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  return {
    browser, context, page, errors,
    async close() {
      expect(foreign.length === 0, `requests to other origins: ${foreign.join(', ')}`);
      const real = errors.filter((e) => !/Failed to load resource.*(409|net::ERR_)/.test(e) && !/EventSource/.test(e));
      expect(real.length === 0, `page errors: ${real.join(' | ')}`);
      await browser.close();
    },
  };
}

/** shot saves a screenshot as NAME.png in the screenshot directory. */
export async function shot(page, name) {
  mkdirSync(SCREENS, { recursive: true });
  const path = join(SCREENS, name + '.png');
  await page.screenshot({ path });
  console.log('screenshot', path);
}

/** open loads the UI with the token (traded for a cookie, then redirected). */
export async function open(page) {
  await page.goto(URL_WITH_TOKEN);
  expect(!page.url().includes('token='), `the token stayed in the URL: ${page.url()}`);
  await page.waitForSelector('#conn[data-state="open"]');
}

/**
 * newSession creates a session through the dialog: the workspace folder
 * is chosen with the directory picker (typed path), then the preset.
 */
export async function newSession(page, { permission = 'workspace-write', title, model } = {}) {
  await page.click('#new-session');
  await page.waitForSelector('#new-dialog[open]');
  const known = await page.$$eval('#ws-select option', (os) => os.map((o) => o.textContent));
  if (!known.some((t) => t.includes(WORKSPACE))) {
    if (await page.isHidden('#picker')) await page.click('#ws-add');
    await page.fill('#picker-input', WORKSPACE);
    await page.press('#picker-input', 'Enter');
    await page.waitForFunction((p) => document.getElementById('picker').dataset.path === p, WORKSPACE);
    await page.click('#picker-choose');
    await page.waitForFunction((p) => [...document.querySelectorAll('#ws-select option')].some((o) => o.selected && o.textContent.includes(p)), WORKSPACE);
  }
  await page.selectOption('#perm-select', permission);
  if (model) await page.selectOption('#model-select', model);
  if (title) await page.fill('#title-input', title);
  await page.click('#new-create');
  await page.waitForFunction(() => /^#\/s\//.test(location.hash));
  await page.waitForSelector('#composer:not([hidden])');
  return page.evaluate(() => location.hash.slice(4));
}

/** prompt types text into the composer and sends it with Enter. */
export async function prompt(page, text) {
  await page.fill('#composer-input', text);
  await page.press('#composer-input', 'Enter');
}

/** run wraps a scenario: errors print and exit 1. */
export async function run(fn) {
  try {
    await fn();
    console.log('PASS');
    process.exit(0); // pipes (a scenario's stdin) must not keep node alive
  } catch (err) {
    console.error('FAIL:', err && err.stack ? err.stack : err);
    // What the page looked like, and what the API says, for the log.
    let n = 0;
    for (const c of contexts) {
      for (const p of c.pages()) {
        try {
          await shot(p, `FAIL-${process.argv[1].split('/').pop().replace('.mjs', '')}-${n++}`);
          const dump = await p.evaluate(async () => {
            const id = (location.hash.match(/^#\/s\/(.+)/) || [])[1];
            if (!id) return 'no session open';
            const [info, ev] = await Promise.all([fetch('/api/sessions/' + id).then((r) => r.text()), fetch('/api/sessions/' + id + '/events?after=-1&limit=1000').then((r) => r.text())]);
            let lines = ev;
            try {
              lines = JSON.parse(ev).events.filter((e) => !['assistant/chunk', 'request/header'].includes(e.type))
                .map((e) => `${e.seq} ${e.type} ${JSON.stringify(e.data).slice(0, 400)}`).join('\n');
            } catch { /* the raw text then */ }
            return info + '\n' + lines;
          });
          console.error('page state:', dump.slice(0, 12000));
        } catch (e) {
          console.error('no page dump:', e.message);
        }
      }
    }
    process.exit(1);
  }
}
