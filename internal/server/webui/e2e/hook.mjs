// A hook that denies a tool call shows why, next to the refused call.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  await newSession(page, { title: 'Guarded by a hook' });
  await prompt(page, 'Push the branch.');
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('The hook refused')));
  const note = await page.innerText('.item-note .note.warn');
  expect(note.startsWith('Hook PreToolUse (Bash) denied it') && note.includes('no pushing'), `hook note: ${note}`);
  expect(await page.isVisible('.tool-bash .pill.error, .tool-bash .pill.rejected'), 'the refused call is not marked');
  await shot(page, 'l1-hook');
  await b.close();
});
