// Links from model and tool text: only absolute http: and https: URLs
// become links. A scripted answer and web_fetch cards carry javascript:
// (in several spellings), data:, vbscript: and a raw <a> tag; none of them
// may end up as a link, none may run, and https URLs still link.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  const dialogs = [];
  page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss(); });
  await open(page);
  await newSession(page, { title: 'Hostile links' });
  await prompt(page, 'Show me some links.');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('End of links')));
  await page.waitForSelector('#status-badge.idle');

  // Every link in the conversation, with its attribute as written.
  const links = await page.$$eval('#timeline a', (as) => as.map((a) => ({ href: a.getAttribute('href'), text: a.textContent })));
  console.log('links', JSON.stringify(links));
  for (const l of links) {
    const internal = /^#\/s\/[A-Za-z0-9_-]+$/.test(l.href || '');
    let proto = '';
    try { proto = new URL(l.href).protocol; } catch { /* relative: not allowed either */ }
    expect(internal || proto === 'http:' || proto === 'https:', `a link to ${JSON.stringify(l.href)} (${l.text})`);
  }
  expect(links.some((l) => l.href === 'https://example.com/' && l.text === 'docs'), 'the markdown https link is not a link');
  expect(links.some((l) => l.href === 'https://docs.example.invalid/ok'), 'the https web_fetch URL is not a link');

  // The hostile URLs are still shown, as text.
  const cards = await page.$$eval('.tool-web_fetch', (cs) => cs.map((c) => c.innerText));
  for (const u of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'data:text/html', 'vbscript:msgbox(1)']) {
    expect(cards.some((c) => c.includes(u)), `no web_fetch card shows ${u}: ${cards.join(' | ')}`);
  }
  const answer = (await page.$$eval('.item-assistant .answer', (as) => as.map((a) => a.innerText))).join('\n');
  expect(answer.includes('[click](javascript:alert(1))') && answer.includes('<a href="javascript:alert(2)">raw</a>'), `answer text: ${answer}`);

  // Clicking what a hostile link would have been runs nothing.
  for (const el of await page.$$('#timeline .unlinked')) await el.click();
  await shot(page, 'k1-hostile-links');
  await page.locator('.item-assistant .answer').last().scrollIntoViewIfNeeded();
  await shot(page, 'k2-hostile-links-answer');
  expect(dialogs.length === 0, `a dialog opened: ${dialogs.join(', ')}`);
  await b.close();
});
