// Drives `dsh acp` with the official ACP TypeScript SDK through questions
// and plan mode (see questions_sdk_test.go, which scripts the fake model):
//
//   1. a client without form elicitation: session/set_mode plan; the
//      model's ask_user_question arrives as session/request_permission
//      with one option per choice (the client picks the second); its
//      exit_plan_mode as a request_permission it answers "keep planning",
//      then "approve"; plan mode ends (current_mode_update back to the
//      preset) and the write that follows runs.
//   2. a client with form elicitation: a two-question form (one
//      multi-select) arrives as elicitation/create and is accepted.
//
// Every byte dsh writes is appended to $FRAMES/N.out (and what it read
// to N.in) for the Go test to validate against the ACP schema.
// Usage: node sdk-questions.mjs DSH. Env: ACP_SDK, FRAMES, CWD.
import { spawn } from "node:child_process";
import { PassThrough, Readable, Writable } from "node:stream";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";

const acp = await import(process.env.ACP_SDK || "@agentclientprotocol/sdk");
const dsh = process.argv[2];
const cwd = process.env.CWD;
let procs = 0;

function start(events, handlers) {
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
  let app = acp
    .client({ name: "dsh-sdk-questions" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      events.push({ sessionId: params.sessionId, update: params.update });
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => handlers.permission(params));
  if (handlers.elicit) {
    app = app.onRequest(acp.methods.client.elicitation.create, async ({ params }) => handlers.elicit(params));
  }
  const eof = () => (toAgent.writableEnded ? child.stdin.end() : toAgent.end());
  return { stream, app, exited, eof };
}

const summary = { permissions: [], elicitations: [] };

// 1. request_permission client
{
  const events = [];
  let plans = 0;
  const one = start(events, {
    permission: (params) => {
      summary.permissions.push(params);
      if (params.toolCall.kind === "switch_mode") {
        plans++;
        const id = plans === 1 ? "keep-planning" : "approve-plan";
        return { outcome: { outcome: "selected", optionId: id } };
      }
      return { outcome: { outcome: "selected", optionId: params.options[1].optionId } };
    },
  });
  await one.app.connectWith(one.stream, async (agent) => {
    await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    });
    const s = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    summary.modes = s.modes;
    await agent.request(acp.methods.agent.session.setMode, { sessionId: s.sessionId, modeId: "plan" });
    const r = await agent.request(acp.methods.agent.session.prompt, { sessionId: s.sessionId, prompt: [{ type: "text", text: "plan, ask, then write" }] });
    assert.equal(r.stopReason, "end_turn");
    summary.modeUpdates = events.filter((e) => e.update.sessionUpdate === "current_mode_update").map((e) => e.update.currentModeId);
    summary.written = fs.existsSync(path.join(cwd, "planned.txt"));
  });
  one.eof();
  summary.exit1 = await one.exited;
}

// 2. form elicitation client
{
  const events = [];
  const two = start(events, {
    permission: () => ({ outcome: { outcome: "cancelled" } }),
    elicit: (params) => {
      summary.elicitations.push(params);
      return { action: "accept", content: { db: "Postgres", langs: ["Go", "Zig"] } };
    },
  });
  await two.app.connectWith(two.stream, async (agent) => {
    await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, elicitation: { form: {} } },
    });
    const s = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    const r = await agent.request(acp.methods.agent.session.prompt, { sessionId: s.sessionId, prompt: [{ type: "text", text: "ask me two things" }] });
    assert.equal(r.stopReason, "end_turn");
  });
  two.eof();
  summary.exit2 = await two.exited;
}

process.stdout.write(JSON.stringify(summary));
