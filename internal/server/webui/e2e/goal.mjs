// Goals: a goal posted through the API shows in the goal bar, whose
// round count follows the rounds the host starts, until the cap blocks
// it; the rounds and the block are marked in the timeline.
import { launch, open, newSession, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  const id = await newSession(page, { title: 'A goal' });
  const status = await page.evaluate(async (sid) => {
    const r = await fetch(`/api/sessions/${encodeURIComponent(sid)}/goal`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ objective: 'Rename every helper', maxRounds: 2 }),
    });
    return r.status;
  }, id);
  expect(status === 200, `POST goal: ${status}`);
  await page.waitForSelector('#goal-bar:not([hidden])');
  await page.waitForFunction(() => document.getElementById('goal-phase').innerText.startsWith('blocked'));
  const bar = await page.innerText('#goal-bar');
  expect(bar.includes('Rename every helper') && bar.includes('round 2/2') && bar.includes('round cap'), `goal bar: ${bar}`);
  const notes = await page.$$eval('.timeline', (els) => els.map((e) => e.innerText).join('\n'));
  expect(notes.includes('Goal round 1') && notes.includes('Goal round 2') && notes.includes('Goal blocked'), `timeline: ${notes}`);
  await shot(page, 'g1-goal');
  await b.close();
});
