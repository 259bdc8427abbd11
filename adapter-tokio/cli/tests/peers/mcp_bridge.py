"""A real client: the official MCP Python SDK drives `spillguard mcp`.

The tools are those of mcp_tools.toml (next to this file). One session
lists and calls them (a 64 MiB stderr flood, approvals accepted, declined,
cancelled and expired, invalid arguments, a helper that cannot be spawned,
a made-up token on stderr and in results, a cancel mid-call), with the
server's stdout copied byte for byte to a file that must hold JSON-RPC
messages only, and neither it nor the audit log the token. A client without the
elicitation capability is refused. Two disconnects mid-call, one per
policy, must leave every record in the audit log and no helper alive.
The time from tools/call to the elicitation request is measured quiet and
while another helper floods stderr. 200 approvals at once, each card
accepted as soon as it comes (5 s approval timeout), all complete: the
cards go out at once, and at most max_running approved helpers run while
the others wait queued, so the client keeps the processor it needs to read
the next cards.

Usage: python mcp_bridge.py PATH/TO/spillguard [PATH/TO/mcp_tools.toml]
Exits non-zero at the first wrong fact.
       python mcp_bridge.py --latency PATH/TO/spillguard TOOLS BLOCKS
prints the tools/call -> elicitation times only (`cargo xtask bench`).
       python mcp_bridge.py --approvals PATH/TO/spillguard [CALLS [FLAG...]]
runs the approvals check alone (200 calls unless said) and prints its line.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

SPILLGUARD = sys.argv[1]
TOOLS = os.path.abspath(
    sys.argv[2]
    if len(sys.argv) > 2
    else os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_tools.toml")
)
FLOOD = 64 << 20
EXCERPT = 4096
SECRET = b"ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # the leak tools' made-up token
WORK = tempfile.mkdtemp(prefix="spillguard-mcp-py-")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def equal(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def card(path):
    return (
        "tool: touch\n"
        "description: create the file PATH\n"
        f"target: {path}\n"
        f"command: touch -- {path}\n"
        "deadline: host default\n"
        "approval expires: 1500 ms after it is shown"
    )


def activity(log):
    out = subprocess.run(
        [SPILLGUARD, "audit", "activity", log, "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


def alive(pid):
    """Whether `pid` runs (a zombie, exited and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    # ESRCH: it was reaped between the open and the read.
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


async def wait_for_pid(pidfile):
    for _ in range(1000):
        try:
            with open(pidfile) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except FileNotFoundError:
            pass
        await anyio.sleep(0.01)
    raise AssertionError(f"no pid in {pidfile}")


def server(args, tee=None):
    argv = ["mcp", "--tools", TOOLS, *args]
    if tee is None:
        return StdioServerParameters(command=SPILLGUARD, args=argv)
    # The server's stdout, copied to `tee` as it goes to the client.
    return StdioServerParameters(
        command="sh", args=["-c", '"$0" "$@" | tee "$TEE_OUT"', SPILLGUARD, *argv],
        env=dict(os.environ) | {"TEE_OUT": tee},
    )


class Approver:
    """Answers each approval card with the next of `answers`, after
    `delays` seconds; keeps the messages and when they came."""

    def __init__(self):
        self.answers = []
        self.messages = []
        self.arrived = []

    async def __call__(self, context, params):
        self.arrived.append(time.monotonic())
        self.messages.append(params.message)
        action, delay = self.answers.pop(0) if self.answers else ("decline", 0)
        if delay:
            await anyio.sleep(delay)
        if action == "accept-bare":
            # What a callback writes for a form with nothing to fill: the
            # SDK then leaves `content` out of the result.
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action=action, content={} if action == "accept" else None)


def content(result):
    sc = result.structured_content
    check(isinstance(sc, dict), f"structuredContent is an object: {result}")
    text = result.content[0].text
    if not result.is_error:
        # A completed call: the text a model reads is the result itself.
        value = sc["result"]
        equal(text if isinstance(value, str) else json.loads(text), value, "text content: the result")
        return sc
    # Otherwise one paragraph: how it ended, then the stderr excerpt.
    first = text.split("\n", 1)[0]
    if sc["state"] == "completed":
        check(" completed but gave no result: " in first, f"text content says there is no result: {text!r}")
    else:
        check(f" did not complete: state {sc['state']}, " in first, f"text content says how it ended: {text!r}")
    if sc["exit_status"] is not None:
        check(f"exit status {sc['exit_status']}" in first, f"text content: the exit status: {text!r}")
    if sc["stderr_excerpt"]:
        check(text.endswith(":\n" + sc["stderr_excerpt"]), f"text content ends with the excerpt: {text!r}")
    else:
        check(text.endswith(". No stderr."), f"text content: no stderr: {text!r}")
    return sc


async def main_session():
    log = os.path.join(WORK, "calls.log")
    out = os.path.join(WORK, "stdout.bytes")
    approver = Approver()
    async with stdio_client(server(["--audit", log], tee=out)) as (read, write):
        async with ClientSession(read, write, elicitation_callback=approver) as client:
            init = await client.initialize()
            equal(init.server_info.name, "spillguard", "server name")
            listed = await client.list_tools()
            equal([t.name for t in listed.tools], ["flood", "leak", "leak_text", "missing", "not_json", "sleep", "touch"], "tools")
            touch_tool = next(t for t in listed.tools if t.name == "touch")
            equal(
                touch_tool.input_schema,
                {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "pattern": "^/tmp/[A-Za-z0-9_./-]+$"}
                    },
                    "required": ["path"],
                    "additionalProperties": False,
                },
                "touch inputSchema",
            )

            # 64 MiB of stderr: the result is intact, the excerpt bounded.
            result = await client.call_tool("flood", {"bytes": FLOOD})
            sc = content(result)
            equal(result.is_error, False, "flood isError")
            equal(sc["state"], "completed", "flood state")
            equal(sc["exit_status"], 0, "flood exit")
            equal(sc["result"], {"ok": True, "bytes": FLOOD}, "flood result")
            equal(sc["result_kind"], "success", "flood result_kind")
            equal(sc["stderr_bytes_seen"], FLOOD, "stderr_bytes_seen")
            equal(sc["stderr_truncated"], True, "stderr_truncated")
            equal(sc["stderr_bytes_retained"], EXCERPT, "retained (a discovery's budget)")
            excerpt = sc["stderr_excerpt"]
            check(len(excerpt.encode()) <= EXCERPT, f"excerpt of {len(excerpt.encode())} bytes")
            marker = re.match(r"\[stderr truncated: kept last (\d+) of 67108864 bytes\]\n", excerpt)
            check(marker, f"marker first: {excerpt[:80]!r}")
            # 64 MiB is 3728270 lines of 18 bytes and "help": the tail kept
            # is whole lines and that last part, exactly as many bytes as
            # the marker says.
            kept = int(marker.group(1))
            rest = excerpt[marker.end():]
            equal(len(rest.encode()), kept, "bytes after the marker")
            equal(rest, "helper-diagnostic\n" * ((kept - 4) // 18) + "help", "the tail kept")
            print(f"flood: {FLOOD} bytes seen, excerpt {len(excerpt.encode())} bytes, marker {marker.group(0).strip()}")

            # Approval accepted: the card is the call's, the helper runs.
            done = os.path.join(WORK, "accepted")
            approver.answers.append(("accept", 0))
            result = await client.call_tool("touch", {"path": done})
            sc = content(result)
            equal(approver.messages[-1], card(done), "the card")
            equal((result.is_error, sc["state"], sc["approval"]), (False, "completed", "granted"), "accepted")
            check(os.path.exists(done), "the approved helper ran")

            # Accepted with no content at all (`ElicitResult(action="accept")`):
            # the card asks for no field, so that is a yes too.
            bare = os.path.join(WORK, "accepted-bare")
            approver.answers.append(("accept-bare", 0))
            result = await client.call_tool("touch", {"path": bare})
            sc = content(result)
            equal(
                (result.is_error, sc["state"], sc["approval"], sc["exit_status"]),
                (False, "completed", "granted", 0),
                "accepted without content",
            )
            check(os.path.exists(bare), "the helper approved without content ran")

            # Declined and cancelled: nothing runs.
            for action, state in (("decline", "denied"), ("cancel", "cancelled_before_dispatch")):
                path = os.path.join(WORK, action)
                approver.answers.append((action, 0))
                result = await client.call_tool("touch", {"path": path})
                sc = content(result)
                equal((result.is_error, sc["state"]), (True, state), action)
                equal(sc["pid"], None, f"{action}: no pid")
                check(not os.path.exists(path), f"{action}: the helper did not run")

            # Expired: the card lives 1.5 s; the answer comes after 3 s.
            path = os.path.join(WORK, "expired")
            approver.answers.append(("accept", 3))
            started = time.monotonic()
            result = await client.call_tool("touch", {"path": path})
            took = time.monotonic() - started
            sc = content(result)
            equal((result.is_error, sc["state"], sc["approval"]), (True, "approval_expired", "expired"), "expired")
            check(1.5 <= took < 2.9, f"the expired call answered after {took:.3f} s")
            check(not os.path.exists(path), "expired: the helper did not run")
            print(f"approval expired: answered {took:.3f} s after tools/call (card 1.5 s)")

            # Invalid arguments: a tool result, a record, nothing ran.
            result = await client.call_tool("touch", {"path": "relative", "mode": 1})
            sc = content(result)
            equal((result.is_error, sc["state"]), (True, "failed_before_dispatch"), "invalid")
            equal(
                sc["failure"],
                'invalid arguments for tool touch: mode: unknown parameter (known: path); '
                'path: "relative" does not match ^/tmp/[A-Za-z0-9_./-]+$',
                "invalid: failure",
            )
            # A helper that cannot be spawned.
            result = await client.call_tool("missing", {})
            sc = content(result)
            equal((result.is_error, sc["state"], sc["spawn_error_kind"]), (True, "failed_before_dispatch", "not_found"), "missing")
            # A made-up token on stderr and in the result: the client is
            # shown the rule that replaced it, in both, and the counts.
            for tool, shown in (
                ("leak", {"note": "pushed with [redacted: github-token]", "rows": 3}),
                ("leak_text", "pushed with [redacted: github-token]\n"),
            ):
                sc = content(await client.call_tool(tool, {}))
                equal(sc["state"], "completed", f"{tool}: state")
                equal(sc["result"], shown, f"{tool}: result")
                equal(sc["stderr_excerpt"], "push failed for [redacted: github-token]\n", f"{tool}: excerpt")
                equal((sc["stderr_redactions"], sc["stdout_redactions"]), (1, 1), f"{tool}: redactions")
            # A JSON result promised and not given: completed, but an error.
            result = await client.call_tool("not_json", {})
            sc = content(result)
            equal((result.is_error, sc["state"], sc["result"]), (True, "completed", None), "not_json")
            equal(sc["result_error"], "invalid JSON at line 1 column 2: expected ident", "not_json: result_error")
            # An unknown tool is a protocol error: there is no call to record.
            try:
                await client.call_tool("nope", {})
                raise AssertionError("an unknown tool was answered")
            except MCPError as error:
                equal(error.error.code, -32602, "unknown tool: error code")

            # A cancel mid-call: the SDK sends notifications/cancelled.
            pidfile = os.path.join(WORK, "cancelled.pid")
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "sleep", {"pidfile": pidfile, "seconds": 30})
                pid = await wait_for_pid(pidfile)
                group.cancel_scope.cancel()
            for _ in range(500):
                if not alive(pid):
                    break
                await anyio.sleep(0.01)
            check(not alive(pid), "the cancelled helper is gone")

            # Time from tools/call to the elicitation request, quiet and
            # while another helper floods stderr.
            quiet = await elicitation_latency(client, approver, 20)
            async with anyio.create_task_group() as group:
                flood_done = anyio.Event()

                async def flood():
                    await client.call_tool("flood", {"bytes": 2 << 30})
                    flood_done.set()

                group.start_soon(flood)
                await anyio.sleep(0.2)
                # Only rounds that ended while the flood ran count; on a
                # loaded machine the flood may end before all 20 did.
                cards_before = len(approver.arrived)
                noisy = await elicitation_latency(client, approver, 20, while_running=flood_done)
                noisy_calls = len(approver.arrived) - cards_before
                check(len(noisy) >= 5, f"5 rounds or more while the flood ran: {len(noisy)}")
            print(
                "tools/call -> elicitation/create: "
                f"quiet median {ms(statistics.median(quiet))} p90 {ms(p90(quiet))}; "
                f"with a 2 GiB stderr flood running ({len(noisy)} rounds) median {ms(statistics.median(noisy))} p90 {ms(p90(noisy))}"
            )

    records = activity(log)
    by_state = {}
    for record in records:
        check(record["finished"], f"a final record for {record['call_id']}")
        by_state.setdefault((record["action"], record["state"]), 0)
        by_state[(record["action"], record["state"])] += 1
    equal(by_state.get(("sleep", "cancelled_after_dispatch")), 1, "the cancelled call's record")
    equal(by_state.get(("flood", "completed")), 2, "the floods' records")
    equal(by_state.get(("touch", "denied")), 21 + noisy_calls, "the denied cards' records")
    equal(by_state.get(("leak", "completed")), 1, "the leak's record")
    equal(len(records), 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 2 + 1 + 40, "every call has its record")
    sessions = subprocess.run(
        [SPILLGUARD, "audit", "sessions", log, "--json"], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    equal(len(sessions), 1, "one MCP session")
    session = json.loads(sessions[0])
    check(session["session_id"].startswith("mcp_"), "the session id")
    equal((session["calls"], session["unfinished"]), (len(records), 0), "the session's calls")

    # Every line the server wrote on stdout is a JSON-RPC message.
    with open(out, "rb") as f:
        raw = f.read()
    check(raw.endswith(b"\n"), "stdout ends with a newline")
    lines = raw.split(b"\n")[:-1]
    for line in lines:
        message = json.loads(line)
        equal(message.get("jsonrpc"), "2.0", "a JSON-RPC message")
        check("id" in message or "method" in message, f"a request, response or notification: {line[:80]!r}")
    print(f"stdout: {len(raw)} bytes, {len(lines)} lines, every one a JSON-RPC message")
    # Nothing the server wrote, to the client or to the log, holds the token.
    with open(log, "rb") as f:
        logged = f.read()
    for where, data in (("stdout", raw), ("the audit log", logged)):
        check(SECRET not in data, f"the token is not in {where}")


def ms(seconds):
    return f"{seconds * 1000:.2f} ms"


def p90(values):
    return sorted(values)[int(len(values) * 0.9) - 1]


async def elicitation_latency(client, approver, rounds, while_running=None):
    """Seconds from each `tools/call` to its card, for `rounds` declined
    calls; with `while_running`, only the rounds that ended before that
    event was set."""
    took = []
    for i in range(rounds):
        approver.answers.append(("decline", 0))
        before = len(approver.arrived)
        sent = time.monotonic()
        result = await client.call_tool("touch", {"path": os.path.join(WORK, f"never-{i}")})
        equal(result.structured_content["state"], "denied", "a declined round")
        equal(len(approver.arrived), before + 1, "one card per call")
        if while_running is not None and while_running.is_set():
            break
        took.append(approver.arrived[-1] - sent)
    return took


async def modern_session():
    """The SDK's high-level Client negotiates 2026-07-28, where a server
    sends no request of its own: the card comes back as `input_required`
    and the retry carries the answer."""
    from mcp.client.client import Client

    approver = Approver()
    params = server([])
    async with Client(params, elicitation_callback=approver) as client:
        equal(client.session.protocol_version, "2026-07-28", "the modern protocol")
        for action, state in (("accept", "completed"), ("decline", "denied"), ("cancel", "cancelled_before_dispatch")):
            path = os.path.join(WORK, f"modern-{action}")
            approver.answers.append((action, 0))
            result = await client.call_tool("touch", {"path": path})
            sc = content(result)
            equal(approver.messages[-1], card(path), f"modern {action}: the card")
            equal((result.is_error, sc["state"]), (action != "accept", state), f"modern {action}")
            equal(os.path.exists(path), action == "accept", f"modern {action}: whether the helper ran")
        # The card's deadline runs between the two legs.
        path = os.path.join(WORK, "modern-expired")
        approver.answers.append(("accept", 2))
        result = await client.call_tool("touch", {"path": path})
        equal(content(result)["state"], "approval_expired", "modern: expired")
        check(not os.path.exists(path), "modern expired: the helper did not run")
        # The flood's result, as on the handshake protocol.
        result = await client.call_tool("flood", {"bytes": 1 << 20})
        sc = content(result)
        equal((sc["state"], sc["result"], sc["stderr_bytes_seen"]), ("completed", {"ok": True, "bytes": 1 << 20}, 1 << 20), "modern flood")

        # The retry is held to the call its requestState names.
        session = client.session
        path = os.path.join(WORK, "modern-tampered")
        first = await session.call_tool("touch", {"path": path}, allow_input_required=True)
        equal(first.result_type, "input_required", "the first leg")
        equal(sorted(first.input_requests), ["approval"], "the input requests")
        accept = {"approval": {"action": "accept", "content": {}}}
        try:
            await session.call_tool(
                "touch", {"path": path + "-other"}, input_responses=accept,
                request_state=first.request_state, allow_input_required=True,
            )
            raise AssertionError("a retry with other arguments was answered")
        except MCPError as error:
            equal(error.error.code, -32602, "other arguments: error code")
        try:
            await session.call_tool(
                "touch", {"path": path}, input_responses=accept,
                request_state=first.request_state, allow_input_required=True,
            )
            raise AssertionError("a requestState was resumed twice")
        except MCPError as error:
            equal(error.error.code, -32602, "resumed twice: error code")
        check(not os.path.exists(path), "a tampered retry approves nothing")
    print("2026-07-28: approvals through input_required accepted, declined, cancelled and expired; tampered retries refused")


async def without_elicitation():
    path = os.path.join(WORK, "no-elicitation")
    async with stdio_client(server([])) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            result = await client.call_tool("touch", {"path": path})
            sc = content(result)
            equal((result.is_error, sc["state"]), (True, "failed_before_dispatch"), "no elicitation")
            equal(
                sc["failure"],
                "approval required, but the client did not declare the elicitation capability: "
                "no approval card can be shown, so the call is refused",
                "no elicitation: failure",
            )
            check(not os.path.exists(path), "no elicitation: the helper did not run")
            # A tool without approval still runs.
            result = await client.call_tool("flood", {"bytes": 10})
            equal(content(result)["state"], "completed", "no elicitation: a discovery runs")


async def client_that_dies(policy, log, pidfile, server_pidfile):
    """Run in a process of its own (`--client-that-dies`): starts a call
    that runs and one that shows its card, says READY, and waits to be
    killed."""
    seconds = "1" if policy == "finish" else "30"
    approver = Approver()
    approver.answers.append(("accept", 600))
    params = StdioServerParameters(
        command="sh",
        args=[
            "-c",
            'echo $$ > "$SERVER_PID"; exec "$0" "$@"',
            SPILLGUARD, "mcp", "--tools", TOOLS, "--audit", log, "--on-disconnect", policy,
        ],
        env=dict(os.environ) | {"SERVER_PID": server_pidfile},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=approver) as client:
            await client.initialize()
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "sleep", {"pidfile": pidfile, "seconds": int(seconds)})
                group.start_soon(client.call_tool, "touch", {"path": pidfile + ".touched"})
                await wait_for_pid(pidfile)
                while not approver.messages:
                    await anyio.sleep(0.01)
                print("READY", flush=True)
                await anyio.sleep(600)


async def disconnect(policy):
    """The client dies mid-call (SIGKILL), one helper running and one card
    on screen: the server's stdin ends without a cancel for either call."""
    log = os.path.join(WORK, f"disconnect-{policy}.log")
    pidfile = os.path.join(WORK, f"disconnect-{policy}.pid")
    server_pidfile = os.path.join(WORK, f"disconnect-{policy}.server")
    client = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--client-that-dies", SPILLGUARD, TOOLS,
         policy, log, pidfile, server_pidfile],
        stdout=subprocess.PIPE,
        text=True,
    )
    equal(client.stdout.readline().strip(), "READY", f"{policy}: the client is ready")
    helper = await wait_for_pid(pidfile)
    server_pid = await wait_for_pid(server_pidfile)
    killed = time.monotonic()
    client.kill()
    client.wait()
    with anyio.fail_after(20):
        while alive(server_pid):
            await anyio.sleep(0.005)
    took = time.monotonic() - killed
    check(not alive(helper), f"{policy}: no helper alive after the server exited")
    records = {r["action"]: r for r in activity(log)}
    equal(sorted(records), ["sleep", "touch"], f"{policy}: every call has a record")
    for record in records.values():
        check(record["finished"], f"{policy}: {record['action']} has its final record")
    expected = "completed" if policy == "finish" else "cancelled_after_dispatch"
    # The whole row when it fails: its exit status or signal tells a stop
    # by the server from one by the helper.
    equal(records["sleep"]["state"], expected, f"{policy}: the running call {records['sleep']}")
    equal(records["touch"]["state"], "cancelled_before_dispatch", f"{policy}: the card on screen")
    check(not os.path.exists(pidfile + ".touched"), f"{policy}: the unapproved helper did not run")
    print(
        f"disconnect ({policy}): running call {expected}, card cancelled_before_dispatch, "
        f"server exited {took:.3f} s after its client was killed"
    )


async def wire_corners():
    """JSON-RPC corners through the SDK's stdio transport: requests the
    session types could not even build (a tools/call without a name, with
    arguments that are not an object), and a duplicate id."""
    from mcp.shared.message import SessionMessage

    Request = types.jsonrpc.JSONRPCRequest
    Notification = types.jsonrpc.JSONRPCNotification

    async with stdio_client(server([])) as (read, write):
        async def send(message):
            await write.send(SessionMessage(message))

        async def receive():
            with anyio.fail_after(10):
                item = await read.receive()
            check(not isinstance(item, Exception), f"the SDK read a message: {item!r}")
            return item.message.model_dump(by_alias=True, exclude_none=True)

        await send(Request(jsonrpc="2.0", id="init", method="initialize", params={
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "wire", "version": "1"}}))
        equal((await receive())["id"], "init", "wire: initialized")
        await send(Notification(jsonrpc="2.0", method="notifications/initialized"))
        for request_id, params, message in [
            (1, {"arguments": {}}, "Invalid params: tools/call needs params.name, the tool's name"),
            (2, {"name": "sleep", "arguments": [1]}, "Invalid params: tools/call: params.arguments must be an object"),
        ]:
            await send(Request(jsonrpc="2.0", id=request_id, method="tools/call", params=params))
            answer = await receive()
            equal((answer["id"], answer["error"]["code"], answer["error"]["message"]),
                  (request_id, -32602, message), f"wire: tools/call {params}")
        pidfile = os.path.join(WORK, "dup.pid")
        await send(Request(jsonrpc="2.0", id=7, method="tools/call",
                           params={"name": "sleep", "arguments": {"pidfile": pidfile, "seconds": 1}}))
        await send(Request(jsonrpc="2.0", id=7, method="ping"))
        first, second = await receive(), await receive()
        equal((first["id"], first["error"]["code"]), (7, -32600), "wire: the duplicate's own error")
        equal(first["error"]["message"],
              "Invalid Request: a request with id 7 is still in flight (an id is unique among "
              "the requests not yet answered); the first one goes on", "wire: duplicate message")
        equal((second["id"], second["result"]["structuredContent"]["state"]), (7, "completed"),
              "wire: the first call's answer")


async def many_approvals(calls=200, extra=()):
    """`calls` tool calls that need approval, sent at once; the client
    accepts each card as soon as it reads it; the cards live 5 s; each
    helper spins for about 0.1 s of CPU, so that most calls wait queued.
    Every call must end `completed`."""
    tools = os.path.join(WORK, "approvals.toml")
    with open(tools, "w") as f:
        f.write(
            '[tools.deploy]\ndescription = "deploys"\n'
            # About 0.1 s of CPU each: 200 started at once would leave the
            # client little to read the next cards.
            'command = ["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"]\n'
            'approval = "required"\napproval_timeout_ms = 5000\n'
        )

    async def accept(context, params):
        return types.ElicitResult(action="accept", content={})

    params = StdioServerParameters(command=SPILLGUARD, args=["mcp", "--tools", tools, *extra])
    records = []
    started = time.monotonic()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=accept) as client:
            await client.initialize()

            async def one():
                result = await client.call_tool("deploy", {})
                records.append(result.structured_content)

            async with anyio.create_task_group() as group:
                for _ in range(calls):
                    group.start_soon(one)
    took = time.monotonic() - started
    states = {}
    for record in records:
        states[record["state"]] = states.get(record["state"], 0) + 1
    waited = [
        record["admitted_offset_us"] - record["queued_offset_us"]
        for record in records
        if record["admitted_offset_us"] is not None
    ]
    longest = max(waited, default=0) / 1000
    print(
        f"{calls} approvals at once: {json.dumps(states, sort_keys=True)} in {took:.1f} s; "
        f"{sum(1 for w in waited if w > 1000)} waited queued over 1 ms (longest {longest:.0f} ms)"
    )
    equal(states, {"completed": calls}, f"{calls} approvals at once")


async def main():
    started = time.monotonic()
    await many_approvals()
    await wire_corners()
    await main_session()
    await modern_session()
    await without_elicitation()
    await disconnect("cancel")
    await disconnect("finish")
    print(f"mcp_bridge.py: every check passed in {time.monotonic() - started:.1f} s")


async def latency(blocks):
    """`--latency`: the time from tools/call to the elicitation request, in
    blocks of 10 calls each: quiet; while the same flood runs outside
    spillguard (`yes | head -c 1G | cat >/dev/null`, the CPU it takes on
    this machine without any stderr to capture); and while a helper floods
    stderr through spillguard (a discovery writing 1 GiB). Each flood is
    restarted as soon as it ends. Prints one JSON line of milliseconds."""
    approver = Approver()
    quiet, busy, noisy = [], [], []
    async with stdio_client(server([])) as (read, write):
        async with ClientSession(read, write, elicitation_callback=approver) as client:
            await client.initialize()
            await elicitation_latency(client, approver, 10)  # warm up

            async def outside():
                while True:
                    await anyio.run_process(
                        ["sh", "-c", "yes helper-diagnostic | head -c 1073741824 | cat >/dev/null"]
                    )

            async def through():
                while True:
                    await client.call_tool("flood", {"bytes": 1 << 30})

            for _ in range(blocks):
                quiet += await elicitation_latency(client, approver, 10)
                for flood, times in ((outside, busy), (through, noisy)):
                    async with anyio.create_task_group() as group:
                        group.start_soon(flood)
                        await anyio.sleep(0.1)
                        times += await elicitation_latency(client, approver, 10)
                        group.cancel_scope.cancel()
    print(json.dumps({
        "quiet_ms": [t * 1000 for t in quiet],
        "busy_ms": [t * 1000 for t in busy],
        "noisy_ms": [t * 1000 for t in noisy],
    }))


if sys.argv[1] == "--latency":
    SPILLGUARD, TOOLS = sys.argv[2], os.path.abspath(sys.argv[3])
    anyio.run(latency, int(sys.argv[4]))
elif sys.argv[1] == "--approvals":
    SPILLGUARD = sys.argv[2]
    anyio.run(many_approvals, int(sys.argv[3]) if len(sys.argv) > 3 else 200, sys.argv[4:])
elif sys.argv[1] == "--client-that-dies":
    SPILLGUARD, TOOLS = sys.argv[2], sys.argv[3]
    anyio.run(client_that_dies, *sys.argv[4:8])
else:
    anyio.run(main)
