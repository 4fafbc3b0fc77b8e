// (c) A reload while an approval is pending shows it again (same id) and
// answering still works; a second tab sees it too and updates live; a
// rejection carries its feedback.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

const file = process.env.EXPECT_FILE;

run(async () => {
  const b = await launch();
  const { page, context } = b;
  await open(page);
  await newSession(page, { permission: 'read-only', title: 'Survive a reload' });
  await prompt(page, `Write ${file}, then try the second file.`);
  await page.waitForSelector('#approval:not([hidden])');
  const id1 = await page.getAttribute('#approval', 'data-approval');
  await page.reload();
  await page.waitForSelector('#approval:not([hidden])');
  const id2 = await page.getAttribute('#approval', 'data-approval');
  expect(id1 && id1 === id2, `approval after reload ${id2}, before ${id1}`);
  expect((await page.innerText('#approval')).includes(file), 'the reloaded panel lost the path');
  await shot(page, 'c1-after-reload');
  // A second tab on the same session shows the same approval.
  const tab2 = await context.newPage();
  await tab2.goto(page.url());
  await tab2.waitForSelector('#approval:not([hidden])');
  expect(await tab2.getAttribute('#approval', 'data-approval') === id1, 'the second tab shows another approval');
  await page.click('#allow-btn');
  await tab2.waitForSelector('.tool-bash .pill.ok');
  await page.waitForSelector('.tool-bash .pill.ok');
  // The model's second write: reject it with feedback, from the second tab.
  await tab2.waitForSelector('#approval:not([hidden])');
  await tab2.waitForFunction((prev) => document.getElementById('approval').dataset.approval !== prev, id1);
  await tab2.click('#reject-btn');
  await tab2.fill('#reject-feedback', 'Not that one, thanks.');
  await shot(tab2, 'c2-reject-feedback');
  await tab2.click('#reject-send');
  await page.waitForSelector('#approval', { state: 'hidden' });
  await page.waitForFunction(() => !!document.querySelector('.tool-bash .pill.rejected'));
  await page.waitForSelector('#status-badge.idle');
  const card = await page.innerText('.tool-bash:last-of-type, .item-tool:last-of-type');
  console.log('rejected card:', card.replace(/\n/g, ' | '));
  await shot(page, 'c3-after');
  await b.close();
});
