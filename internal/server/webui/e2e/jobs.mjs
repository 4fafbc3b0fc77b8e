// Background jobs: a job started by a bash call shows in the side panel,
// first running, then completed, and its notice starts the next turn.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await newSession(page, { title: 'Run a job' });
  await prompt(page, 'Run the slow job in the background.');
  await page.waitForSelector('#side-panel:not([hidden]) .job');
  await page.waitForSelector('.tool-bash .pill', { state: 'visible' });
  expect((await page.innerText('.tool-bash .pill')).includes('background'), 'the bash card does not say it went to the background');
  await page.waitForSelector('.job .pill.ok');
  const job = await page.innerText('.job');
  expect(job.includes('completed') && job.includes('Slow job'), `job row: ${job}`);
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('The background job finished')));
  await page.waitForSelector('#status-badge.idle');
  await shot(page, 'f1-jobs');
  await b.close();
});
