#!/usr/bin/env python3
"""Drive dsh through `dsh rpc`, with nothing but the standard library.

usage: rpc_client.py [CWD [PROMPT]]   (env DSH: the dsh binary, default "dsh")

Streams the answer as it is written, rejects every approval the agent
asks for (saying so), and prints how the turn ended.
"""
import json
import os
import queue
import subprocess
import sys
import threading


class Dsh:
    """A dsh rpc connection: one request at a time per caller thread."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.lock = threading.Lock()
        self.next_id = 0
        self.replies = {}  # request id -> queue of its response
        self.on_notification = lambda method, params: None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "method" in msg:
                self.on_notification(msg["method"], msg.get("params") or {})
            else:
                with self.lock:
                    q = self.replies.pop(msg["id"])
                q.put(msg)

    def call(self, method, **params):
        with self.lock:
            rid = self.next_id
            self.next_id += 1
            q = self.replies[rid] = queue.Queue(maxsize=1)
            frame = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            self.proc.stdin.write(json.dumps(frame) + "\n")
            self.proc.stdin.flush()
        msg = q.get()
        if "error" in msg:
            err = msg["error"]
            raise RuntimeError(f"{method}: {err['message']} ({(err.get('data') or {}).get('code')})")
        return msg["result"]

    def close(self):
        """Ends the session: dsh cancels what runs, flushes and exits."""
        self.proc.stdin.close()
        code = self.proc.wait(timeout=10)
        self.reader.join()
        return code


def main():
    cwd = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    prompt = sys.argv[2] if len(sys.argv) > 2 else "Say hello."
    dsh = Dsh([os.environ.get("DSH", "dsh"), "rpc"])
    answering = []

    def notified(method, params):
        if method == "session/event":
            event = params["event"]
            if event["type"] == "assistant/chunk":
                chunk = event["data"]["chunk"]
                if chunk["type"] == "text-delta":
                    print(chunk["text"], end="", flush=True)
        elif method == "approval/requested":
            a = params["approval"]
            print(f"\n[approval] {a['toolName']} {a.get('command', '')}: rejected", flush=True)
            # Answer off the reader thread: it must keep reading replies.
            t = threading.Thread(target=dsh.call, args=("approval/respond",), kwargs={
                "sessionId": a["sessionId"], "approvalId": a["id"],
                "decision": "reject", "feedback": "this script allows nothing"})
            t.start()
            answering.append(t)

    dsh.on_notification = notified
    dsh.call("initialize", clientInfo={"name": "rpc_client.py"})
    session = dsh.call("session/create", cwd=cwd)["session"]
    result = dsh.call("session/prompt", sessionId=session["header"]["id"], text=prompt)["result"]
    for t in answering:
        t.join()
    usage = result["usage"]
    print(f"\n[{result['status']}] {result['text']!r} "
          f"(tokens in {usage.get('inputTokens', 0)}, out {usage.get('outputTokens', 0)})")
    sys.exit(dsh.close())


if __name__ == "__main__":
    main()
