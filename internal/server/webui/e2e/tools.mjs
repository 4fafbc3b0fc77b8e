// Tool cards: a write shows the new file as a diff, an edit its diff, a
// read the path, a web fetch the URL, each with its status.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await newSession(page, { title: 'Edit a file' });
  await prompt(page, 'Create notes.md, then fix its heading, then fetch the docs.');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('Done editing')));
  await page.waitForSelector('#status-badge.idle');
  const write = await page.innerText('.tool-write');
  expect(write.includes('+# Notes') && write.includes('notes.md'), `write card: ${write}`);
  const edit = await page.innerText('.tool-edit');
  expect(edit.includes('-# Notes') && edit.includes('+# Project notes'), `edit card: ${edit}`);
  expect(await page.isVisible('.tool-edit .dl.add') && await page.isVisible('.tool-edit .dl.del'), 'the edit diff is not marked');
  expect(await page.isVisible('.tool-edit .pill.ok'), 'the edit is not done');
  const fetchCard = await page.innerText('.tool-web_fetch');
  expect(fetchCard.includes('https://docs.example.invalid/guide'), `fetch card: ${fetchCard}`);
  await shot(page, 'j1-tool-cards');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot(page, 'j2-tool-cards-dark');
  await b.close();
});
