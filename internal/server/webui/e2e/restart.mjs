// A restart of dsh serve loses nothing: the page reconnects by itself,
// resumes its streams after the last seq it saw (no event twice), and the
// session goes on. The Go test restarts the server when this script
// prints RESTART and writes a line to its stdin once the new one listens.
import { createInterface } from 'node:readline';
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

// Lines are queued as they come: the answer may arrive before it is awaited.
const queued = [];
const waiting = [];
createInterface({ input: process.stdin }).on('line', (l) => (waiting.length ? waiting.shift()(l) : queued.push(l)));
const nextLine = () => (queued.length ? Promise.resolve(queued.shift()) : new Promise((resolve) => waiting.push(resolve)));

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await newSession(page, { title: 'Survive a restart' });
  await prompt(page, 'First question.');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('First answer')));
  await page.waitForSelector('#status-badge.idle');
  const count = () => page.evaluate(() => document.querySelectorAll('#timeline > li').length);
  const before = await count();
  console.log('RESTART');
  await page.waitForSelector('#conn[data-state="retrying"]');
  await shot(page, 'g1-reconnecting');
  await nextLine();
  // The streams ask for retry: 1000, so the browser reconnects about a
  // second after the new server listens (EventSource's default is ~3 s).
  const listening = Date.now();
  await page.waitForSelector('#conn[data-state="open"]', { timeout: 20000 });
  const reconnectMs = Date.now() - listening;
  console.log('reconnected ms', reconnectMs);
  expect(reconnectMs < 2500, `the page reconnected ${reconnectMs} ms after the server listened`);
  expect(await count() === before, `the timeline changed across the reconnect: ${before} → ${await count()}`);
  await prompt(page, 'Second question.');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('Second answer')));
  await page.waitForSelector('#status-badge.idle');
  const users = await page.$$eval('.item-user', (els) => els.map((e) => e.innerText.trim()));
  expect(users.length === 2 && users[0] === 'First question.' && users[1] === 'Second question.', `prompts: ${JSON.stringify(users)}`);
  const answers = await page.$$eval('.item-assistant .answer', (els) => els.map((e) => e.innerText.trim()));
  expect(answers.length === 2, `answers: ${JSON.stringify(answers)}`);
  await shot(page, 'g2-after-restart');
  await b.close();
});
