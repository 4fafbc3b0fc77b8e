// (a) A prompt streams its answer into the page: the answer grows in
// several steps before it is complete, then the turn ends idle.
import { launch, open, newSession, prompt, shot, expect, run } from './lib.mjs';

const answer = process.env.EXPECT_TEXT;
const STEERED = 'Mention the log too.';

run(async () => {
  const b = await launch();
  const { page } = b;
  await open(page);
  // First paint: the best of three loads, so that a CPU busy with other
  // test binaries measures the page rather than the scheduler.
  const paints = [];
  for (let i = 0; i < 3; i++) {
    if (i > 0) await page.reload();
    paints.push(await page.evaluate(() => new Promise((resolve) => {
      const found = () => performance.getEntriesByName('first-contentful-paint')[0];
      if (found()) return resolve(found().startTime);
      new PerformanceObserver(() => { if (found()) resolve(found().startTime); }).observe({ type: 'paint', buffered: true });
    })));
  }
  const fcp = Math.min(...paints);
  console.log('first-contentful-paint ms', paints.map(Math.round).join(' '));
  expect(fcp < 300, `first contentful paint took ${fcp} ms at best`);
  await page.waitForSelector('#conn[data-state="open"]');
  await shot(page, 'a0-empty');
  // Keyboard only: Tab reaches "New session" (after the skip link), Enter
  // opens the dialog, Escape closes it.
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  expect(await page.evaluate(() => document.activeElement.id) === 'new-session', 'Tab does not reach New session');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#new-dialog[open]');
  await page.keyboard.press('Escape');
  await page.waitForSelector('#new-dialog', { state: 'hidden' });
  await newSession(page, { title: 'Explain the streaming' });
  await prompt(page, 'Explain how the answer streams in.');
  // Sample the answer while it streams: it must be seen partial, growing.
  const seen = new Set();
  await page.waitForSelector('.item-assistant .answer');
  let shotTaken = false;
  for (;;) {
    const s = await page.evaluate(() => {
      const a = document.querySelector('.item-assistant .answer');
      return { text: a ? a.innerText : '', streaming: !!document.querySelector('.item-assistant .caret') };
    });
    if (s.streaming && s.text) seen.add(s.text.length);
    if (s.streaming && !shotTaken && s.text.length > 40) {
      // A message typed during the turn is queued for the next one.
      await page.fill('#composer-input', 'And then?');
      await page.press('#composer-input', 'Enter');
      await page.waitForSelector('.queued.next-turn');
      expect((await page.innerText('#queue')).includes('And then?'), 'the queued message is not shown');
      // A second one is queued too, then steered into the running turn
      // with its "Steer now" button: it leaves the queue for next-step.
      await page.fill('#composer-input', STEERED);
      await page.press('#composer-input', 'Enter');
      await page.waitForFunction((t) => [...document.querySelectorAll('.queued.next-turn')].some((e) => e.innerText.includes(t)), STEERED);
      await shot(page, 'a1-streaming');
      await page.click(`.queued.next-turn:has-text("${STEERED}") button.steer-now`);
      await page.waitForFunction((t) => [...document.querySelectorAll('.queued.next-step')].some((e) => e.innerText.includes(t)), STEERED);
      await shot(page, 'a1b-steering');
      shotTaken = true;
    }
    if (!s.streaming && s.text) break;
    await page.waitForTimeout(25);
  }
  expect(seen.size >= 3, `the answer did not stream in: saw ${seen.size} partial lengths`);
  // The queued message runs as the next turn.
  await page.waitForFunction(() => [...document.querySelectorAll('.item-assistant .answer')].some((e) => e.innerText.includes('Then the page is done.')));
  await page.waitForSelector('#status-badge.idle');
  expect(await page.isHidden('#queue'), 'the queue did not empty');
  // The log: the steered message entered the first turn (its user/message
  // lies between that turn's start and end, after the steered splice),
  // and "And then?" ran as the second turn.
  const turns = await page.evaluate(async (steered) => {
    const id = location.hash.slice(4);
    const { events } = await (await fetch(`/api/sessions/${id}/events?after=-1&limit=1000`)).json();
    let turn = 0;
    const where = {};
    const splices = new Map();
    for (const e of events) {
      if (e.type === 'turn/start') turn = e.data.turn;
      if (e.type === 'agent/inbox/spliced') {
        splices.set(e.seq, e.data.inserted || []);
        if (e.data.outcome === 'steered') where.steeredInTurn = turn;
      }
      if (e.type === 'user/message') {
        // Stored as a reference to the splice that queued it.
        const m = e.data.inboxRef ? splices.get(e.data.inboxRef.seq)[e.data.inboxRef.index] : e.data;
        const text = (m.content || []).map((b) => b.text || '').join('');
        if (text === steered) where.steered = turn;
        if (text === 'And then?') where.queued = turn;
      }
    }
    return where;
  }, STEERED);
  expect(turns.steeredInTurn === 1 && turns.steered === 1 && turns.queued === 2, `turns of the messages: ${JSON.stringify(turns)}`);
  expect(await page.isVisible(`.item-user:has-text("${STEERED}")`), 'the steered message is not in the conversation');
  const text = await page.innerText('.item-assistant .answer');
  const norm = (x) => x.replace(/\s+/g, ' ').trim();
  expect(norm(text).includes(norm(answer).slice(0, 40)), `final answer ${JSON.stringify(text)}`);
  expect(await page.isVisible('.item-user'), 'the prompt is not shown');
  expect(await page.isVisible('.reasoning'), 'reasoning is not shown');
  expect(!(await page.getAttribute('.reasoning', 'open')), 'reasoning is not collapsed');
  // The sidebar lists the session under its workspace, titled.
  await page.waitForFunction(() => [...document.querySelectorAll('.sess-title')].some((e) => e.textContent === 'Explain the streaming'));
  await shot(page, 'a2-done');
  // A reload rebuilds the same page from the log.
  await page.reload();
  await page.waitForSelector('.item-assistant .answer');
  await page.waitForFunction((t) => document.querySelector('.item-assistant .answer').innerText === t, text);
  // A phone-sized window: the sidebar becomes an overlay behind a button.
  await page.setViewportSize({ width: 390, height: 780 });
  expect(await page.isHidden('#sidebar'), 'the sidebar takes the narrow screen');
  await shot(page, 'a4-narrow');
  await page.click('#nav-toggle');
  await page.waitForSelector('#sidebar', { state: 'visible' });
  await shot(page, 'a5-narrow-nav');
  await page.click('.sess');
  await page.waitForSelector('#sidebar', { state: 'hidden' });
  await page.setViewportSize({ width: 1280, height: 820 });
  // Dark mode reads too.
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot(page, 'a3-dark');
  await b.close();
});
