// Plan mode: the composer's toggle puts the session in plan mode (chip,
// banner, pressed toggle); a write is refused; the plan comes up for
// review with rendered markdown; "Keep planning" sends feedback that
// reaches the model; "Approve plan" ends plan mode and the write runs.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await newSession(page, { title: 'Plan before writing' });
  expect(await page.isHidden('#plan-chip'), 'a new session starts in plan mode');
  await page.click('#plan-btn');
  await page.waitForSelector('#plan-chip:not([hidden])');
  await page.waitForSelector('#plan-btn[aria-pressed="true"]');
  await page.waitForSelector('#plan-banner:not([hidden])');
  await page.waitForSelector('.note.plan');
  await shot(page, 'p0-plan-mode');
  await prompt(page, 'Write plan.txt with a greeting.');
  await page.waitForSelector('#question[data-kind="plan"]:not([hidden])');
  const review = await page.innerText('#question');
  expect(review.includes('Review the plan') && review.includes('Plan v1'), `plan card: ${review}`);
  expect(await page.isVisible('#question .plan-review h3'), 'the plan\'s heading is not rendered as markdown');
  expect(await page.isVisible('#question .plan-review code'), 'the plan\'s inline code is not rendered');
  // The write before the plan was refused.
  expect(await page.isVisible('.tool-write .pill.error'), 'the write in plan mode was not refused');
  await shot(page, 'p1-plan-review');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot(page, 'p1-plan-review-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  const first = await page.getAttribute('#question', 'data-question');
  await page.click('#plan-keep');
  await page.fill('#plan-feedback', 'Greet the reader by name.');
  await shot(page, 'p2-keep-planning');
  await page.click('#plan-feedback-send');
  await page.waitForFunction((prev) => { const q = document.getElementById('question'); return !q.hidden && q.dataset.question !== prev; }, first);
  expect((await page.innerText('#question')).includes('Plan v2'), 'the second plan is not shown');
  await page.click('#plan-approve');
  await page.waitForSelector('#question', { state: 'hidden' });
  await page.waitForSelector('#plan-chip', { state: 'hidden' });
  await page.waitForSelector('#plan-btn[aria-pressed="false"]');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('Wrote plan.txt')));
  await page.waitForSelector('#status-badge.idle');
  const pills = await page.$$eval('.qcard.plan .pill', (xs) => xs.map((x) => x.innerText));
  expect(JSON.stringify(pills) === JSON.stringify(['kept planning', 'approved']), `plan cards: ${JSON.stringify(pills)}`);
  expect((await page.innerText('.qcard.plan .q-feedback')).includes('Greet the reader by name.'), 'the feedback is not in the transcript');
  expect(await page.isVisible('.tool-write .pill.ok'), 'the write after the approval did not run');
  await shot(page, 'p3-approved');
  // The toggle works both ways while idle.
  await page.click('#plan-btn');
  await page.waitForSelector('#plan-chip:not([hidden])');
  await page.click('#plan-btn');
  await page.waitForSelector('#plan-chip', { state: 'hidden' });
  await b.close();
});
