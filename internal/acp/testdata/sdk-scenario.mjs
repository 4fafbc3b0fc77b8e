// Drives `dsh acp` with the official ACP TypeScript SDK
// (@agentclientprotocol/sdk) as the client, through the scenarios the Go
// test (sdk_test.go) scripts the fake model for, in this order:
//
//   1. text: a text turn; the streamed chunks must equal the scripted text
//   2. tool: a read call: tool_call, then exactly one final update (same id)
//   3. reject: mode read-only (session/set_mode), a write raises
//      session/request_permission, reject-once gives a failed call and
//      nothing written
//   4. cancel: session/cancel mid-stream answers cancelled after the last
//      update; a second prompt while it runs is an error
//   5. fail: a model failure is a JSON-RPC error carrying the dsh code
//   6. cwd: a relative cwd is an error
// then, in a second dsh acp process: session/list contains the text
// session, session/load replays the same conversation, session/close.
//
// Every byte dsh writes to stdout is appended to $FRAMES for the Go test
// to validate against the ACP schema. Usage: node sdk-scenario.mjs DSH.
// Env: ACP_SDK (the SDK's dist/v1/stable/acp.js), FRAMES, CWD (an
// absolute directory holding hello.txt).
import { spawn } from "node:child_process";
import { PassThrough, Readable, Writable } from "node:stream";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";

const acp = await import(process.env.ACP_SDK || "@agentclientprotocol/sdk");
const dsh = process.argv[2];
const cwd = process.env.CWD;
let procs = 0;

// start spawns dsh acp and connects a client; events records updates and
// prompt answers in arrival order.
function start(events, onPermission) {
  procs++;
  const out = fs.openSync(path.join(process.env.FRAMES, `${procs}.out`), "w");
  const inn = fs.openSync(path.join(process.env.FRAMES, `${procs}.in`), "w");
  const child = spawn(dsh, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
  const tap = new PassThrough();
  child.stdout.on("data", (d) => {
    fs.writeSync(out, d);
    tap.write(d);
  });
  child.stdout.on("end", () => tap.end());
  const toAgent = new PassThrough();
  toAgent.on("data", (d) => fs.writeSync(inn, d));
  toAgent.pipe(child.stdin);
  const exited = new Promise((resolve) => child.on("exit", (code, sig) => resolve({ code, sig })));
  const stream = acp.ndJsonStream(Writable.toWeb(toAgent), Readable.toWeb(tap));
  const app = acp
    .client({ name: "dsh-sdk-scenario" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      events.push({ kind: "update", sessionId: params.sessionId, update: params.update });
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => onPermission(params));
  // Ending the pipe into dsh is stdin EOF for it.
  const eof = () => (toAgent.writableEnded ? child.stdin.end() : toAgent.end());
  return { child, stream, app, exited, eof };
}

const text = (events, sid, kind) =>
  events
    .filter((e) => e.kind === "update" && e.sessionId === sid && e.update.sessionUpdate === kind)
    .map((e) => e.update.content.text)
    .join("");

const summary = {};
// events records in arrival order; a listener runs on every push, so a
// wait is a promise settled by the event itself, never a poll.
const events = [];
const listeners = new Set();
const push = events.push.bind(events);
events.push = (e) => {
  const n = push(e);
  for (const l of listeners) l(e);
  return n;
};
let permissionAsked = null;
const one = start(events, (params) => {
  permissionAsked = params;
  return { outcome: { outcome: "selected", optionId: params.options.find((o) => o.kind === "reject_once").optionId } };
});

await one.app.connectWith(one.stream, async (agent) => {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  assert.equal(init.protocolVersion, 1);
  assert.equal(init.agentCapabilities.loadSession, true);
  assert.deepEqual(init.authMethods, []);

  // 1. text
  const a = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const r1 = await agent.request(acp.methods.agent.session.prompt, { sessionId: a.sessionId, prompt: [{ type: "text", text: "say hello" }] });
  assert.equal(r1.stopReason, "end_turn");
  summary.textSession = a.sessionId;
  summary.text = text(events, a.sessionId, "agent_message_chunk");
  summary.thought = text(events, a.sessionId, "agent_thought_chunk");
  summary.modes = a.modes;
  summary.model = a.configOptions[0].currentValue;

  // 2. tool
  const b = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const r2 = await agent.request(acp.methods.agent.session.prompt, { sessionId: b.sessionId, prompt: [{ type: "text", text: "read hello.txt" }] });
  assert.equal(r2.stopReason, "end_turn");
  summary.toolUpdates = events.filter((e) => e.sessionId === b.sessionId && e.update.sessionUpdate.startsWith("tool_call")).map((e) => e.update);

  // 3. reject
  const c = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  await agent.request("session/set_mode", { sessionId: c.sessionId, modeId: "read-only" });
  summary.modeUpdates = events.filter((e) => e.sessionId === c.sessionId && e.update.sessionUpdate === "current_mode_update").map((e) => e.update.currentModeId);
  const r3 = await agent.request(acp.methods.agent.session.prompt, { sessionId: c.sessionId, prompt: [{ type: "text", text: "write out.txt" }] });
  assert.equal(r3.stopReason, "end_turn");
  summary.permission = permissionAsked;
  summary.rejectUpdates = events.filter((e) => e.sessionId === c.sessionId && e.update.sessionUpdate.startsWith("tool_call")).map((e) => e.update);
  summary.written = fs.existsSync(path.join(cwd, "out.txt"));

  // 4. cancel
  const d = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const chunked = new Promise((resolve) => {
    const l = (e) => {
      if (e.sessionId === d.sessionId && e.kind === "update" && e.update.sessionUpdate === "agent_message_chunk") {
        listeners.delete(l);
        resolve();
      }
    };
    listeners.add(l);
  });
  const p4 = agent.request(acp.methods.agent.session.prompt, { sessionId: d.sessionId, prompt: [{ type: "text", text: "talk slowly" }] })
    .then((r) => { events.push({ kind: "answer", sessionId: d.sessionId, result: r }); return r; });
  await chunked;
  try {
    await agent.request(acp.methods.agent.session.prompt, { sessionId: d.sessionId, prompt: [{ type: "text", text: "again" }] });
    summary.busyError = null;
  } catch (e) {
    summary.busyError = { code: e.code, message: e.message };
  }
  await agent.notify(acp.methods.agent.session.cancel, { sessionId: d.sessionId });
  const r4 = await p4;
  summary.cancelStop = r4.stopReason;
  summary.cancelText = text(events, d.sessionId, "agent_message_chunk");

  // 5. fail
  const f = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  try {
    await agent.request(acp.methods.agent.session.prompt, { sessionId: f.sessionId, prompt: [{ type: "text", text: "fail" }] });
    summary.failError = null;
  } catch (e) {
    summary.failError = { code: e.code, data: e.data };
  }

  // 6. cwd
  try {
    await agent.request(acp.methods.agent.session.new, { cwd: "relative/dir", mcpServers: [] });
    summary.cwdError = null;
  } catch (e) {
    summary.cwdError = { code: e.code, message: e.message };
  }
  // Updates of the cancelled session after its answer would be a bug.
  const answerAt = events.findIndex((e) => e.kind === "answer" && e.sessionId === d.sessionId);
  summary.updatesAfterCancel = events.slice(answerAt + 1).filter((e) => e.sessionId === d.sessionId).length;
});

// stdin EOF: dsh exits 0, in time.
const t0 = Date.now();
one.eof();
summary.exit = await one.exited;
summary.exitMs = Date.now() - t0;

// A second process: list, load, close.
const events2 = [];
const two = start(events2, () => ({ outcome: { outcome: "cancelled" } }));
await two.app.connectWith(two.stream, async (agent) => {
  await agent.request(acp.methods.agent.initialize, { protocolVersion: 7, clientCapabilities: {} })
    .then((r) => (summary.negotiated = r.protocolVersion));
  const list = await agent.request("session/list", { cwd });
  summary.listed = list.sessions.map((s) => s.sessionId);
  summary.listedTitle = list.sessions.find((s) => s.sessionId === summary.textSession)?.title;
  await agent.request("session/load", { sessionId: summary.textSession, cwd, mcpServers: [] });
  summary.replay = events2.filter((e) => e.sessionId === summary.textSession).map((e) => e.update);
  await agent.request("session/close", { sessionId: summary.textSession });
});
two.eof();
summary.exit2 = await two.exited;

process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(0);
