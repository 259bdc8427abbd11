"""`cargo xtask bench --only otel`: CALLS short tool calls (`true`, no
approval) through `spillguard mcp`, one after the other, from the official
MCP Python SDK client; prints one JSON line: {"calls": N, "seconds": S}.
Export is on when the environment names an OTLP endpoint. With --stdio,
the calls go through `spillguard stdio --mcp` to a server written with
the MCP Python SDK (a tool that returns at once) instead.

usage: otel_bench.py PATH/TO/spillguard CALLS [--stdio]
"""

import json
import os
import sys
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

SPILLGUARD, CALLS = sys.argv[1], int(sys.argv[2])
STDIO = "--stdio" in sys.argv[3:]

SERVER = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("bench")


@server.tool()
def t() -> str:
    \"\"\"does nothing\"\"\"
    return ""


server.run()
"""


async def main():
    tools = os.path.join(tempfile.mkdtemp(prefix="spillguard-otel-bench-"), "tools.toml")
    with open(tools, "w") as f:
        f.write('[tools.t]\ndescription = "does nothing"\ncommand = ["true"]\napproval = "none"\n')
    args = ["mcp", "--tools", tools]
    if STDIO:
        args = ["stdio", "--mcp", "--", sys.executable, "-c", SERVER]
    server = StdioServerParameters(command=SPILLGUARD, args=args, env=dict(os.environ))
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            for _ in range(10):
                await client.call_tool("t", {})
            started = time.perf_counter()
            for _ in range(CALLS):
                result = await client.call_tool("t", {})
                if result.is_error:
                    sys.exit(f"a call failed: {result}")
            seconds = time.perf_counter() - started
    print(json.dumps({"calls": CALLS, "seconds": seconds}))


anyio.run(main)
