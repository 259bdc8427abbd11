"""Real peers: the official MCP Python SDK client drives `mcp-server-time`
through `spillguard stdio`, with the host's stderr pipe never read, and the
same server without the guard as the control. Then shutdown by stdin's end
and by SIGTERM to the guard, with `kill(-pgid, 0)` -> ESRCH afterwards.

Usage: python python_sdk.py PATH/TO/spillguard
Exits non-zero at the first wrong fact.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

SPILLGUARD = sys.argv[1]
SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
# Every import the server makes is written to its stderr: far more than a
# pipe holds before anyone answers `initialize`.
NOISY = {"PYTHONVERBOSE": "1"}
PER_CALL = 16384


def unread_pipe():
    """A pipe whose read end nobody reads: the host's stderr pipe."""
    read_end, write_end = os.pipe()
    return read_end, os.fdopen(write_end, "w")


def record_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f.read().splitlines()]


def assert_group_gone(record):
    try:
        os.killpg(record["pgid"], 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"group {record['pgid']} still has processes")


async def session(params, errlog):
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as client:
            init = await client.initialize()
            tools = await client.list_tools()
            now = await client.call_tool("get_current_time", {"timezone": "UTC"})
            return init, tools, now


async def guarded(record):
    params = StdioServerParameters(
        command=SPILLGUARD,
        args=["stdio", "--record", record, "--", *SERVER],
        env=dict(os.environ) | NOISY,
    )
    _, errlog = unread_pipe()
    with anyio.fail_after(60):
        return await session(params, errlog)


async def unguarded():
    """The control: the initialize never comes back, the server is stuck
    writing to a full stderr pipe."""
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=dict(os.environ) | NOISY)
    _, errlog = unread_pipe()
    with anyio.move_on_after(10) as waited:
        await session(params, errlog)
    return waited.cancelled_caught


def check_guarded():
    record = tempfile.mktemp(suffix=".jsonl")
    init, tools, now = anyio.run(guarded, record)
    assert init.server_info.name == "mcp-time", init.server_info
    names = sorted(tool.name for tool in tools.tools)
    assert names == ["convert_time", "get_current_time"], names
    assert not now.is_error, now
    assert json.loads(now.content[0].text)["timezone"] == "UTC", now.content
    lines = record_lines(record)
    os.unlink(record)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["stdout_mode"] == "streamed", line
    assert line["stderr_bytes_seen"] > 10 * PER_CALL, line["stderr_bytes_seen"]
    assert line["stderr_bytes_retained"] == PER_CALL, line["stderr_bytes_retained"]
    assert line["stderr_truncated"] is True, line
    assert line["stderr_excerpt"].startswith("[stderr truncated: kept last "), line["stderr_excerpt"][:80]
    assert line["state"] in ("completed", "cancelled_after_dispatch"), line["state"]
    assert line["stdin_bytes_forwarded"] > 0 and line["stdout_bytes_forwarded"] > 0, line
    assert_group_gone(line)
    print(
        f"guarded: initialize, tools/list {names}, tools/call ok; stderr seen "
        f"{line['stderr_bytes_seen']} B, retained {line['stderr_bytes_retained']} B, "
        f"truncated; state {line['state']}"
    )


def check_control():
    stalled = anyio.run(unguarded)
    assert stalled, "the unguarded server answered initialize with a full stderr pipe"
    print("control: without the guard, initialize stalls (no answer within 10 s)")


INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "peers", "version": "1"},
            },
        }
    )
    + "\n"
).encode()


def started_guard(record):
    read_end, _ = unread_pipe()
    _, write_end = unread_pipe()
    guard = subprocess.Popen(
        [SPILLGUARD, "stdio", "--record", record, "--", *SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=write_end,
        env=dict(os.environ) | NOISY,
    )
    guard.stdin.write(INITIALIZE)
    guard.stdin.flush()
    reply = json.loads(guard.stdout.readline())
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "mcp-time", reply
    return guard


def assert_termed(line, status):
    assert [s["signal"] for s in line["signals"]] == ["TERM"], line["signals"]
    assert (line["exit_signal"], status) == (15, 128 + 15), (line["exit_signal"], status)


def check_shutdown_by_stdin_end():
    record = tempfile.mktemp(suffix=".jsonl")
    guard = started_guard(record)
    guard.stdin.close()
    status = guard.wait(timeout=30)
    lines = record_lines(record)
    os.unlink(record)
    assert len(lines) == 1, lines
    line = lines[0]
    # This server takes about 2 s to exit once its stdin closes: it either
    # exits within the stdin close grace, or its group gets TERM then.
    if line["state"] == "completed":
        assert (line["exit_status"], status, line["signals"]) == (0, 0, []), line
    else:
        assert line["state"] == "cancelled_after_dispatch", line["state"]
        assert line["cancel_reason"] == "stdin_close_grace", line["cancel_reason"]
        assert_termed(line, status)
    assert_group_gone(line)
    print(f"stdin end: stdin closed, state {line['state']}; one record, group gone")


def check_shutdown_by_sigterm():
    record = tempfile.mktemp(suffix=".jsonl")
    guard = started_guard(record)
    guard.send_signal(signal.SIGTERM)
    status = guard.wait(timeout=30)
    lines = record_lines(record)
    os.unlink(record)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["state"] == "cancelled_after_dispatch", line["state"]
    assert line["cancel_reason"] == "requested", line["cancel_reason"]
    if line["signals"]:
        assert_termed(line, status)
    else:
        assert (line["exit_status"], status) == (0, 0), line
    assert_group_gone(line)
    print(f"SIGTERM: stdin closed first, state {line['state']}, signals {line['signals']}, group gone")


CRASH = """import sys
sys.stdin.readline()
sys.stderr.write('Traceback (most recent call last):\\n  File "server.py", line 12, in <module>\\n')
sys.stderr.write("KeyError: 'DATABASE_URL'\\n")
sys.exit(1)
"""


async def crashing_initialize(command, args):
    """The error `initialize` gets from a server that crashes during it,
    and how long it took."""
    params = StdioServerParameters(command=command, args=args)
    _, errlog = unread_pipe()
    started = anyio.current_time()
    with anyio.fail_after(30):
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
        except BaseException as error:  # the SDK may wrap it in a group
            found = error
            while isinstance(found, BaseExceptionGroup):
                found = found.exceptions[0]
            return found, anyio.current_time() - started
    raise AssertionError(f"{command}: initialize succeeded against a crashing server")


def check_crash_diagnostics():
    from mcp.shared.exceptions import MCPError

    record = tempfile.mktemp(suffix=".jsonl")
    error, elapsed = anyio.run(
        crashing_initialize,
        SPILLGUARD,
        ["stdio", "--mcp", "--record", record, "--", sys.executable, "-c", CRASH],
    )
    assert isinstance(error, MCPError), repr(error)
    assert error.error.code == -32000, error.error
    assert error.error.message == "MCP server exited with status 1 before answering", error.error
    data = error.error.data
    assert (data["exit_status"], data["exit_signal"]) == (1, None), data
    assert data["stderr_excerpt"].endswith("KeyError: 'DATABASE_URL'\n"), data["stderr_excerpt"]
    assert elapsed < 1.0, elapsed
    line = record_lines(record)[0]
    os.unlink(record)
    assert (line["state"], line["call_id"]) == ("failed_local", data["call_id"]), line
    assert data["stderr_bytes_seen"] == line["stderr_bytes_seen"], (data, line)
    control, _ = anyio.run(crashing_initialize, sys.executable, ["-c", CRASH])
    assert "DATABASE_URL" not in str(control), control
    print(
        f"crash: initialize answered with exit status 1 and the traceback's last line "
        f"in {elapsed * 1000:.0f} ms; the control says {control!r}"
    )


check_guarded()
check_control()
check_crash_diagnostics()
check_shutdown_by_stdin_end()
check_shutdown_by_sigterm()
print("python sdk peers: ok")
