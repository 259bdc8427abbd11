"""An MCP stdio server that crashes on the third `tools/call` it is ever
given (counted across runs in STATE), and, with --fail-first-start, exits
1 at its first start. Each run appends what it read (`initialize`, the
methods) and its pid to LOG.

usage: crashy_server.py STATE LOG [--fail-first-start]
"""

import json
import os
import sys

STATE, LOG = sys.argv[1], sys.argv[2]


def note(text):
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {text}\n")


def bump(key):
    counts = json.load(open(STATE)) if os.path.exists(STATE) else {}
    counts[key] = counts.get(key, 0) + 1
    with open(STATE, "w") as f:
        json.dump(counts, f)
    return counts[key]


def reply(message, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()


note("start")
if "--fail-first-start" in sys.argv and bump("starts") == 1:
    print("crashy: first start fails", file=sys.stderr, flush=True)
    sys.exit(1)
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    note(method or "answer")
    if method == "initialize":
        reply(message, {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "crashy", "version": "1.0.0"},
        })
    elif method == "tools/list":
        reply(message, {"tools": [{
            "name": "count",
            "description": "counts the calls, and crashes on the third",
            "inputSchema": {"type": "object", "properties": {}},
        }]})
    elif method == "tools/call":
        n = bump("calls")
        if n == 3:
            print(f"crashy: crashing on call {n}", file=sys.stderr, flush=True)
            os._exit(3)
        reply(message, {"content": [{"type": "text", "text": f"call {n} by {os.getpid()}"}]})
    elif method == "ping":
        reply(message, {})
    elif "id" in message and method:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                     "error": {"code": -32601, "message": "no such method"}}) + "\n")
        sys.stdout.flush()
