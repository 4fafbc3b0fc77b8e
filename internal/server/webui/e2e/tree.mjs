// (d) A three-level subagent tree renders (session → child → grandchild)
// and a child opens read-only.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  const root = await newSession(page, { title: 'Delegate twice' });
  await prompt(page, 'Delegate the survey.');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('All three levels')));
  await page.waitForSelector('#status-badge.idle');
  await page.waitForSelector('#side-panel:not([hidden])');
  await page.waitForFunction(() => document.querySelectorAll('#tree .tree-list li[data-depth]').length === 2);
  const rows = await page.$$eval('#tree .tree-list li[data-depth]', (ls) => ls.map((l) => ({ level: l.dataset.depth, text: l.innerText })));
  console.log('tree rows', JSON.stringify(rows));
  expect(rows[0].level === '1' && rows[1].level === '2', `tree levels ${JSON.stringify(rows)}`);
  expect(rows[0].text.includes('Survey the repository') && rows[1].text.includes('Check the tests'), 'tree labels');
  expect(await page.isVisible('.tool-subagent .child-link'), 'the subagent card has no child link');
  await shot(page, 'd1-tree');
  // Open the grandchild from the tree: read-only, its own transcript.
  await page.click('#tree .tree-list li[data-depth="2"] a');
  await page.waitForFunction((r) => location.hash.startsWith('#/s/') && !location.hash.includes(r), root);
  await page.waitForSelector('#readonly-banner:not([hidden])');
  expect(await page.isHidden('#composer'), 'a child session offers a composer');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('The tests pass')));
  expect(await page.isVisible('.item-task'), 'the delegated task is not shown');
  await shot(page, 'd2-grandchild');
  // Up to the middle level through the banner: its card links the grandchild.
  const grandchild = await page.evaluate(() => location.hash.slice(4));
  await page.click('#readonly-banner a');
  await page.waitForFunction((g) => !location.hash.includes(g), grandchild);
  await page.waitForSelector('#readonly-banner:not([hidden])');
  await page.waitForSelector(`.tool-subagent .child-link[data-child="${grandchild}"]`);
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('Survey done')));
  await shot(page, 'd3-child');
  await page.click(`.tool-subagent .child-link[data-child="${grandchild}"]`);
  await page.waitForFunction((g) => location.hash.includes(g), grandchild);
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('The tests pass')));
  await b.close();
});
