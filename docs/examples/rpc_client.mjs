// Drive dsh through `dsh rpc` from Node, with nothing but its standard
// library. usage: node rpc_client.mjs [CWD [PROMPT]]   (env DSH: the dsh
// binary, default "dsh"). Streams the answer, rejects every approval,
// prints how the turn ended.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import path from "node:path";

const cwd = path.resolve(process.argv[2] ?? ".");
const prompt = process.argv[3] ?? "Say hello.";
const dsh = spawn(process.env.DSH ?? "dsh", ["rpc"], { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => dsh.on("exit", (code) => resolve(code)));

let nextId = 0;
const pending = new Map(); // request id -> { resolve, reject }
function call(method, params = {}) {
  const id = nextId++;
  dsh.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

function notified(method, params) {
  if (method === "session/event" && params.event.type === "assistant/chunk") {
    const chunk = params.event.data.chunk;
    if (chunk.type === "text-delta") process.stdout.write(chunk.text);
  } else if (method === "approval/requested") {
    const a = params.approval;
    console.log(`\n[approval] ${a.toolName} ${a.command ?? ""}: rejected`);
    call("approval/respond", { sessionId: a.sessionId, approvalId: a.id, decision: "reject" });
  }
}

createInterface({ input: dsh.stdout }).on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.method) return notified(msg.method, msg.params ?? {});
  const p = pending.get(msg.id);
  pending.delete(msg.id);
  if (msg.error) p.reject(new Error(`${msg.error.message} (${msg.error.data?.code})`));
  else p.resolve(msg.result);
});

await call("initialize", { clientInfo: { name: "rpc_client.mjs" } });
const { session } = await call("session/create", { cwd });
const { result } = await call("session/prompt", { sessionId: session.header.id, text: prompt });
console.log(`\n[${result.status}] ${JSON.stringify(result.text)} (tokens in ${result.usage.inputTokens ?? 0}, out ${result.usage.outputTokens ?? 0})`);
dsh.stdin.end(); // dsh cancels what runs, flushes and exits
process.exit(await exited);
