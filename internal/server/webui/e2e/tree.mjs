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
  await page.waitForFunction(() => document.querySelectorAll('#tree .tree-list li').length === 2);
  const rows = await page.$$eval('#tree .tree-list li', (ls) => ls.map((l) => ({ level: l.getAttribute('aria-level'), text: l.innerText })));
  console.log('tree rows', JSON.stringify(rows));
  console.log('api tree', await page.evaluate(async (r) => (await fetch('/api/sessions/' + r + '/tree')).text(), root));
  console.log('api sessions', await page.evaluate(async () => (await fetch('/api/sessions?children=1')).text()));
  expect(rows[0].level === '1' && rows[1].level === '2', `tree levels ${JSON.stringify(rows)}`);
  expect(rows[0].text.includes('Survey the repository') && rows[1].text.includes('Check the tests'), 'tree labels');
  expect(await page.isVisible('.tool-subagent .child-link'), 'the subagent card has no child link');
  await shot(page, 'd1-tree');
  // Open the grandchild from the tree: read-only, its own transcript.
  await page.click('#tree .tree-list li[aria-level="2"] a');
  await page.waitForFunction((r) => location.hash.startsWith('#/s/') && !location.hash.includes(r), root);
  await page.waitForSelector('#readonly-banner:not([hidden])');
  expect(await page.isHidden('#composer'), 'a child session offers a composer');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('The tests pass')));
  expect(await page.isVisible('.item-task'), 'the delegated task is not shown');
  await shot(page, 'd2-grandchild');
  // Back to the parent through the banner.
  await page.click('#readonly-banner a');
  await page.waitForSelector('.tool-subagent .child-link');
  await page.click('.tool-subagent .child-link');
  await page.waitForSelector('#readonly-banner:not([hidden])');
  await page.waitForSelector('.tool-subagent .child-link');
  await shot(page, 'd3-child');
  await b.close();
});
