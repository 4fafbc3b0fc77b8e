// (b) A scripted write under the read-only preset raises the approval
// panel, which shows exactly what will be written; Allow once writes it.
import { visibleSoon, launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

const file = process.env.EXPECT_FILE;
const reason = process.env.EXPECT_REASON;

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await page.click('#new-session');
  await page.waitForSelector('#new-dialog[open]');
  if (await page.isHidden('#picker')) await page.click('#ws-add');
  await page.waitForSelector('#picker-list li');
  await shot(page, 'b0-new-session-dialog');
  await page.click('#new-cancel');
  await newSession(page, { permission: 'read-only', title: 'Write a greeting' });
  await page.waitForFunction(() => document.getElementById('perm-chip').textContent === 'read-only');
  await prompt(page, `Write ${file} with a greeting.`);
  await page.waitForSelector('#approval:not([hidden])');
  const panel = await page.innerText('#approval');
  expect(panel.includes('bash'), `panel does not name the tool: ${panel}`);
  expect(panel.includes('> ' + file), `panel does not show the command: ${panel}`);
  expect(panel.includes(reason), `panel does not show the justification: ${panel}`);
  // The panel's buttons are in the viewport.
  for (const id of ['#allow-btn', '#reject-btn']) {
    const box = await page.locator(id).boundingBox();
    const vp = page.viewportSize();
    expect(box && box.y >= 0 && box.y + box.height <= vp.height, `${id} is outside the viewport`);
  }
  expect(await page.isVisible('.tool-bash .pill.awaiting'), 'the card is not marked as waiting for approval');
  expect(await visibleSoon(page, '.sess .dot.awaiting-approval'), 'the sidebar does not flag the session');
  await shot(page, 'b1-approval');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot(page, 'b1-approval-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  // Keyboard: the Allow button is reachable and works from the keyboard.
  await page.focus('#allow-btn');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#approval', { state: 'hidden' });
  await page.waitForSelector('.tool-bash .pill.ok');
  await page.waitForSelector('#status-badge.idle');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('Wrote')));
  await shot(page, 'b2-allowed');
  await b.close();
});
