// Several sessions update live: while session A streams, the page shows
// session B, and the sidebar follows A's status over the host feed
// (running, then idle) without a reload.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  const a = await newSession(page, { title: 'Session A' });
  await prompt(page, 'Tell a slow story.');
  await page.waitForSelector('.item-assistant .answer');
  const bId = await newSession(page, { title: 'Session B' });
  expect(a !== bId, 'the second session reused the first id');
  const dot = `.sess[data-session="${a}"] .dot`;
  await page.waitForSelector(`${dot}.running`);
  await shot(page, 'h1-two-sessions');
  await page.waitForSelector(`${dot}.idle`, { timeout: 30000 });
  // Back on A, the whole answer is there.
  await page.click(`.sess[data-session="${a}"]`);
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('The end.')));
  await b.close();
});
