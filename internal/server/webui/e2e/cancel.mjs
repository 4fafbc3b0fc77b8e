// (e) Cancelling a slow streamed answer keeps what had arrived.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

const full = process.env.EXPECT_TEXT;

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await newSession(page, { title: 'Cancel me' });
  await prompt(page, 'Write a long story.');
  await page.waitForFunction(() => {
    const a = document.querySelector('.item-assistant .answer');
    return a && a.innerText.length > 60;
  });
  expect(await page.isVisible('#cancel-btn'), 'no Stop button while running');
  await shot(page, 'e1-before-cancel');
  await page.click('#cancel-btn');
  await page.waitForSelector('.turn-end.aborted');
  await page.waitForSelector('#status-badge.idle');
  const kept = (await page.innerText('.item-assistant .answer')).trim();
  console.log('kept', kept.length, 'of', full.length);
  const norm = (x) => x.replace(/\s+/g, ' ').trim();
  expect(kept.length >= 60, `the partial answer was lost: ${JSON.stringify(kept)}`);
  expect(norm(kept).length < norm(full).length, 'the answer was not cut short');
  expect(norm(full).startsWith(norm(kept)), `kept text is not a prefix: ${JSON.stringify(kept)}`);
  expect(await page.isVisible('.item-assistant .interrupted'), 'no interrupted note');
  await shot(page, 'e2-cancelled');
  // After a reload the partial answer is still there (it is in the log).
  await page.reload();
  await page.waitForSelector('.turn-end.aborted');
  const again = (await page.innerText('.item-assistant .answer')).trim();
  expect(norm(again) === norm(kept), `after reload: ${JSON.stringify(again)}`);
  await b.close();
});
