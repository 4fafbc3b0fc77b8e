// An image pasted into the composer is attached (thumbnail, removable),
// sent with the prompt, and shown in the prompt's bubble from the log.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

const png = process.env.PNG_B64;

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await newSession(page, { model: process.env.VISION_MODEL, title: 'Look at this' });
  const paste = () => page.evaluate((b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], 'dot.png', { type: 'image/png' }));
    document.getElementById('composer-input').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
  }, png);
  await paste();
  await paste();
  await page.waitForFunction(() => document.querySelectorAll('.attachment img').length === 2);
  await page.click('.attachment .remove');
  await page.waitForFunction(() => document.querySelectorAll('.attachment img').length === 1);
  await prompt(page, 'What is in this image?');
  await page.waitForSelector('.item-user img.thumb');
  expect(await page.isHidden('#attachments'), 'the attachment stayed after sending');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('A single dot')));
  await shot(page, 'i1-image');
  await b.close();
});
