// (s) The sidebar's search box finds sessions by what was said in them:
// results with the matched words marked replace the workspace groups, a
// result opens its session, and clearing the box brings the groups back.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  const answered = (text) => page.waitForFunction((t) => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes(t)), text);
  const first = await newSession(page, { title: 'Parser work' });
  await prompt(page, 'Why does the pangolin parser drop trailing whitespace?');
  await answered('The pangolin tokenizer trims');
  await page.waitForSelector('#status-badge.idle');
  await newSession(page, { title: 'Cache work' });
  await prompt(page, 'Tune the cache eviction.');
  await answered('Eviction is now LRU');
  await page.waitForSelector('#status-badge.idle');

  await page.fill('#session-search', 'pangolin');
  await page.waitForSelector('#search-results:not([hidden]) .search-hit');
  expect(await page.isHidden('#session-nav'), 'the workspace groups stay visible while searching');
  const hits = await page.$$eval('#search-results .search-hit', (as) => as.map((a) => ({
    id: a.dataset.session, title: a.querySelector('.sess-title').innerText, marks: [...a.querySelectorAll('mark')].map((m) => m.innerText),
  })));
  console.log('hits', JSON.stringify(hits));
  expect(hits.length === 1 && hits[0].id === first && hits[0].title === 'Parser work', `hits ${JSON.stringify(hits)}`);
  expect(hits[0].marks.length > 0 && hits[0].marks.every((m) => m.toLowerCase() === 'pangolin'), `marks ${JSON.stringify(hits[0].marks)}`);
  await shot(page, 's1-search');

  // Either word: two results; a query without a word: a hint.
  await page.fill('#session-search', 'pangolin OR eviction');
  await page.waitForFunction(() => document.querySelectorAll('#search-results .search-hit').length === 2);
  await page.fill('#session-search', '"()"');
  await page.waitForFunction(() => document.getElementById('search-results').innerText.includes('Type a word'));
  await page.fill('#session-search', 'nosuchwordanywhere');
  await page.waitForFunction(() => document.getElementById('search-results').innerText.includes('No session matches'));

  // A result opens its session.
  await page.fill('#session-search', 'pangolin');
  await page.waitForSelector(`#search-results .search-hit[data-session="${first}"]`);
  await page.click(`#search-results .search-hit[data-session="${first}"]`);
  await page.waitForFunction((id) => location.hash === `#/s/${id}`, first);
  await answered('The pangolin tokenizer trims');
  // Escape clears the box and brings the groups back.
  await page.focus('#session-search');
  await page.keyboard.press('Escape');
  await page.waitForSelector('#search-results', { state: 'hidden' });
  expect(await page.isVisible('#session-nav'), 'the groups did not come back');
  expect(await page.inputValue('#session-search') === '', 'the box was not cleared');
  await shot(page, 's2-opened');
  await b.close();
});
