// Several sessions update live: while session A runs, the page shows
// session B, and the sidebar follows A's status over the host feed
// (running, then idle once A is cancelled) without a reload.
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
  // A's model stream stalls (scripted), so A runs until it is cancelled.
  await page.waitForSelector(`${dot}.running`);
  await shot(page, 'h1-two-sessions');
  const status = await page.evaluate(async (id) => (await fetch(`/api/sessions/${id}/cancel`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' })).status, a);
  expect(status === 202, `cancel answered ${status}`);
  await page.waitForSelector(`${dot}.idle`);
  // Back on A, its partial answer and the cancellation are there.
  await page.click(`.sess[data-session="${a}"]`);
  await page.waitForSelector('.turn-end.aborted');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('A slow story')));
  // A long history: a workspace lists its newest sessions, the rest on request.
  const made = await page.evaluate(async (cwd) => {
    for (let i = 0; i < 26; i++) {
      const r = await fetch('/api/sessions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ cwd, title: `Old session ${i}` }) });
      if (r.status !== 201) return `create ${i}: ${r.status} ${await r.text()}`;
    }
    return '';
  }, process.env.DSH_WORKSPACE);
  expect(made === '', made);
  await page.reload();
  await page.waitForSelector('.sess-list .more');
  const listed = await page.$$eval('.sess', (e) => e.length);
  expect(listed <= 26, `${listed} sessions listed before "Show more"`);
  await page.click('.sess-list .more');
  await page.waitForFunction(() => document.querySelectorAll('.sess').length === 28);
  await b.close();
});
