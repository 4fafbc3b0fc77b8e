// A question from the agent (ask_user_question): the card in the page
// shows the questions with their options; it survives a reload, shows in
// a second tab, and once answered leaves both tabs while the transcript
// keeps what was asked and answered.
import { visibleSoon, launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

run(async () => {
  const b = await launch();
  const { page, context } = b;
  await open(page);
  await newSession(page, { title: 'Set up the service' });
  await prompt(page, 'Help me set up the service.');
  await page.waitForSelector('#question:not([hidden])');
  const id1 = await page.getAttribute('#question', 'data-question');
  const card = await page.innerText('#question');
  for (const want of ['The agent has questions for you', 'Database', 'Which database should the service use?', 'Postgres', 'Embedded in the binary', 'Which checks should CI run?', 'Choose any that apply.']) {
    expect(card.toLowerCase().includes(want.toLowerCase()), `question card lacks ${JSON.stringify(want)}: ${card}`);
  }
  expect(await page.isDisabled('#question-send'), 'the answer can be sent before every question has one');
  expect(await visibleSoon(page, '#status-badge.awaiting-answer'), 'the status badge does not say the session waits for an answer');
  expect(await visibleSoon(page, '.sess .dot.awaiting-answer'), 'the sidebar does not flag the session');
  await shot(page, 'q1-question');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot(page, 'q1-question-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  // A reload while it waits shows the same question again.
  await page.reload();
  await page.waitForSelector('#question:not([hidden])');
  expect(await page.getAttribute('#question', 'data-question') === id1, 'another question after the reload');
  // So does a second tab.
  const tab2 = await context.newPage();
  await tab2.goto(page.url());
  await tab2.waitForSelector('#question:not([hidden])');
  expect(await tab2.getAttribute('#question', 'data-question') === id1, 'the second tab shows another question');
  // Answer: one option of the first, two of the second, by keyboard and mouse.
  await page.click('label.q-option:has-text("SQLite")');
  await page.click('label.q-option:has-text("Unit tests")');
  await page.focus('label.q-option:has-text("Linters") input');
  await page.keyboard.press('Space');
  expect(!(await page.isDisabled('#question-send')), 'the answer cannot be sent once every question has one');
  await shot(page, 'q2-answered-form');
  await page.click('#question-send');
  await page.waitForSelector('#question', { state: 'hidden' });
  await tab2.waitForSelector('#question', { state: 'hidden' });
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('Noted')));
  await page.waitForSelector('#status-badge.idle');
  // The transcript keeps the question with the chosen options marked.
  const chosen = await page.$$eval('.qcard .q-opts li.chosen', (xs) => xs.map((x) => x.dataset.label));
  expect(JSON.stringify(chosen) === JSON.stringify(['SQLite', 'Unit tests', 'Linters']), `chosen chips: ${JSON.stringify(chosen)}`);
  expect(await page.isVisible('.qcard .pill.ok'), 'the question card is not marked answered');
  expect(!(await page.isVisible('.tool-ask_user_question')), 'the raw tool card shows beside the question');
  await shot(page, 'q3-after');
  // The second tab, reloaded, replays the same history.
  await tab2.reload();
  await tab2.waitForSelector('.qcard .pill.ok');
  expect(await tab2.isHidden('#question'), 'the answered question came back after a reload');
  await b.close();
});
