"""The official MCP Python SDK client through `spillguard stdio --mcp
--restart on-failure` in front of tests/peers/crashy_server.py, which
crashes on its third `tools/call`: the third call is answered with the
crash error within 1 s, the fourth by a new server without the client
doing anything, the new server was given the client's `initialize`, and
the client got `notifications/tools/list_changed`.

usage: restart_python.py PATH/TO/spillguard
Exits non-zero at the first wrong fact.
"""

import json
import os
import sys
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

SPILLGUARD = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
WORK = tempfile.mkdtemp(prefix="spillguard-restart-")
STATE, LOG, RECORD = (os.path.join(WORK, n) for n in ("state.json", "server.log", "record.jsonl"))


def check(fact, what):
    if not fact:
        sys.exit(f"wrong: {what}")
    print(f"ok   {what}")


async def main():
    notifications = []

    async def on_message(message):
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if method:
            notifications.append(method)

    server = StdioServerParameters(
        command=SPILLGUARD,
        args=["stdio", "--mcp", "--restart", "on-failure", "--record", RECORD, "--",
              sys.executable, os.path.join(HERE, "crashy_server.py"), STATE, LOG],
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            tools = await session.list_tools()
            check([t.name for t in tools.tools] == ["count"], "tools/list: count")
            first = (await session.call_tool("count", {})).content[0].text
            second = (await session.call_tool("count", {})).content[0].text
            check(first.startswith("call 1 by ") and second.startswith("call 2 by "), f"{first}, {second}")
            started = time.monotonic()
            try:
                await session.call_tool("count", {})
                check(False, "the third call fails")
            except MCPError as error:
                elapsed = time.monotonic() - started
                message = error.error.message
                check("exited with status 3" in message and "restarting (attempt 2 of 5)" in message,
                      f"the third call: {message!r}")
                check("crashing on call 3" in json.dumps(error.error.data), "its data: the stderr tail")
                check(elapsed < 1.0, f"answered within 1 s of the call ({elapsed:.3f} s)")
            fourth = (await session.call_tool("count", {})).content[0].text
            pid_first, pid_fourth = first.split()[-1], fourth.split()[-1]
            check(fourth.startswith("call 4 by ") and pid_fourth != pid_first,
                  f"the fourth call answered by a new server ({fourth}, first run {pid_first})")
            await anyio.sleep(0.2)
            check("notifications/tools/list_changed" in notifications,
                  f"the client got tools/list_changed: {notifications}")
    log = open(LOG).read().split("\n")
    runs = {}
    for line in filter(None, log):
        pid, what = line.split(" ", 1)
        runs.setdefault(pid, []).append(what)
    check(len(runs) == 2, f"two runs: {list(runs)}")
    second_run = runs[pid_fourth]
    check(second_run[:3] == ["start", "initialize", "notifications/initialized"],
          f"the new server was given initialize, then initialized, first: {second_run}")
    check(second_run.count("initialize") == 1 and "tools/call" in second_run, f"second run: {second_run}")
    time.sleep(0.5)
    lines = [json.loads(line) for line in open(RECORD).read().splitlines()]
    check(len(lines) == 2 and lines[0]["exit_status"] == 3 and lines[0]["restarts"] == 0,
          f"a record per run: {[(r['exit_status'], r['restarts']) for r in lines]}")
    record = lines[-1]
    check([record["restarts"], record["restart_reason"], record["crash_loop"]] == [1, "exit status 3", False],
          f"record: restarts {record['restarts']}, {record['restart_reason']!r}, crash_loop {record['crash_loop']}")


anyio.run(main)
