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
  await b.close();
});
