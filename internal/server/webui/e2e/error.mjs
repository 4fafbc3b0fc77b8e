// A failed model call ends the turn with the failure shown in plain words,
// and the session takes the next prompt.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await newSession(page, { title: 'A failing model' });
  await prompt(page, 'Hello?');
  await page.waitForSelector('.turn-end.error');
  const text = await page.innerText('.turn-end.error');
  expect(text.startsWith('Turn failed'), `turn end: ${text}`);
  await page.waitForSelector('#status-badge.idle');
  await shot(page, 'k1-error');
  await prompt(page, 'Try again.');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('Back on track')));
  await page.waitForSelector('#status-badge.idle');
  // Fork: a session of its own (not read-only) that starts from this history.
  const parent = await page.evaluate(() => location.hash.slice(4));
  await page.click('#fork-btn');
  await page.waitForFunction((p) => location.hash.startsWith('#/s/') && !location.hash.includes(p), parent);
  await page.waitForFunction(() => [...document.querySelectorAll('.note')].some((e) => e.innerText.startsWith('Forked here')));
  expect(await page.isHidden('#readonly-banner'), 'a fork opened read-only');
  expect(await page.isVisible('#composer'), 'a fork offers no composer');
  expect((await page.$$eval('.item-user', (els) => els.map((e) => e.innerText.trim()))).join('|') === 'Hello?|Try again.', 'the fork lacks the history');
  await page.waitForSelector('.sess .fork-mark');
  await shot(page, 'k2-fork');
  await b.close();
});
