"""One connected trace, end to end, with real parts: a client using the
OpenTelemetry SDK (`opentelemetry-sdk`, PyPI) starts a span and calls a
tool through `spillguard mcp` with the official MCP Python SDK, putting
`traceparent` in the request's `_meta`. The tool is a helper that uses the
same OpenTelemetry SDK and takes its parent from `TRACEPARENT`.
spillguard exports OTLP/HTTP to the receiver of otlp_receiver.py, which
decodes every request with OpenTelemetry's own protocol package.

Checked: client span -> MCP span (`tools/call NAME`) -> call span -> the
helper's span, one trace id; the MCP span's and the call span's attributes;
an approval wait as a span under the MCP span; a tool error's
`error.type = tool_error`.

With --stdio, the same client calls the tools of an MCP server written
with the MCP Python SDK (its own OpenTelemetry spans on, written to a
file) through `spillguard stdio --mcp` started with a host's
TRACEPARENT. Checked: client span -> the guard's MCP span -> the server's
own span for the same request (the guard puts its span in the request's
`_meta`), with the same name, tool and request id; a request without
trace context (`initialize`) under the host's span; a tool error's
`error.type = tool_error` on both; the server's call span at the exit
with the record's exit code and stderr counts, named by each MCP span's
`spillguard.call.id`.

usage: otel_trace.py PATH/TO/spillguard [--svg PATH | --stdio]
Exits non-zero at the first wrong fact. With --svg, also draws the trace
as a backend's waterfall shows it (the picture in docs/observability.md).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SPILLGUARD = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
WORK = tempfile.mkdtemp(prefix="spillguard-otel-trace-")

HELPER = r'''
import json, os
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
provider = TracerProvider()
tracer = provider.get_tracer("helper")
carrier = {"traceparent": os.environ.get("TRACEPARENT", "")}
if os.environ.get("TRACESTATE"):
    carrier["tracestate"] = os.environ["TRACESTATE"]
context = propagate.extract(carrier)
with tracer.start_as_current_span("helper work", context=context) as span:
    parent = span.parent
    sum(range(200000))
line = {
        "trace_id": format(span.get_span_context().trace_id, "032x"),
        "span_id": format(span.get_span_context().span_id, "016x"),
        "parent_id": format(parent.span_id, "016x") if parent else None,
        "tracestate": os.environ.get("TRACESTATE"),
}
line["start_ns"], line["end_ns"] = span.start_time, span.end_time
print(json.dumps(line))
'''


SERVER = r'''
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from mcp.server.mcpserver import MCPServer


class FileExporter(SpanExporter):
    def __init__(self, path):
        self.path = path

    def export(self, spans):
        with open(self.path, "a") as f:
            for s in spans:
                c = s.get_span_context()
                f.write(json.dumps({
                    "name": s.name, "trace_id": format(c.trace_id, "032x"),
                    "span_id": format(c.span_id, "016x"),
                    "parent_id": format(s.parent.span_id, "016x") if s.parent else None,
                    "attributes": dict(s.attributes or {})}) + "\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter(sys.argv[1])))
trace.set_tracer_provider(provider)
server = MCPServer("traced")


@server.tool()
def work() -> str:
    """does traced work"""
    return "done"


@server.tool()
def broken() -> str:
    """fails"""
    raise ValueError("no route")


print("traced server up", file=sys.stderr, flush=True)
server.run()
'''


def check(fact, what):
    if not fact:
        sys.exit(f"wrong: {what}")


def main():
    if "--stdio" in sys.argv:
        return main_stdio()
    helper = os.path.join(WORK, "helper.py")
    with open(helper, "w") as f:
        f.write(HELPER)
    tools = os.path.join(WORK, "tools.toml")
    with open(tools, "w") as f:
        f.write(
            "[tools.work]\ndescription = \"does traced work\"\n"
            f"command = [{json.dumps(sys.executable)}, {json.dumps(helper)}]\n"
            "approval = \"required\"\napproval_timeout_ms = 20000\n"
            "[tools.broken]\ndescription = \"fails\"\n"
            "command = [\"sh\", \"-c\", \"echo 'no route' >&2; exit 2\"]\napproval = \"none\"\n"
        )
    port_file, received = os.path.join(WORK, "port"), os.path.join(WORK, "received.jsonl")
    receiver = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "otlp_receiver.py"), port_file, received])
    try:
        for _ in range(500):
            if os.path.exists(port_file):
                break
            time.sleep(0.02)
        with open(port_file) as f:
            port = int(f.read())
        anyio.run(session, tools, port)
        # The server has exited; its exit waited for the export.
        for _ in range(250):
            lines = open(received).read().splitlines() if os.path.exists(received) else []
            spans = [s for l in lines for s in json.loads(l).get("spans", [])]
            if len(spans) >= 5:
                break
            time.sleep(0.02)
        check_trace(lines)
    finally:
        receiver.kill()


RESULTS = {}


def start_receiver():
    port_file, received = os.path.join(WORK, "port"), os.path.join(WORK, "received.jsonl")
    receiver = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "otlp_receiver.py"), port_file, received])
    for _ in range(500):
        if os.path.exists(port_file):
            break
        time.sleep(0.02)
    with open(port_file) as f:
        return receiver, int(f.read()), received


def received_spans(received, at_least):
    for _ in range(250):
        lines = open(received).read().splitlines() if os.path.exists(received) else []
        requests = [json.loads(l) for l in lines]
        spans = [s for r in requests for s in r.get("spans", [])]
        if len(spans) >= at_least:
            break
        time.sleep(0.02)
    check(all("error" not in r for r in requests), f"every request decodes: {requests}")
    return spans


# The host's span, given to the guard in TRACEPARENT (with --stdio).
HOST_TRACE, HOST_SPAN = "5ca1ab1e" * 4, "0dd5ba11" * 2


def main_stdio():
    server_py, server_spans = os.path.join(WORK, "server.py"), os.path.join(WORK, "server.jsonl")
    with open(server_py, "w") as f:
        f.write(SERVER)
    record = os.path.join(WORK, "record.json")
    receiver, port, received = start_receiver()
    try:
        env = dict(os.environ) | {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_SERVICE_NAME": "spillguard-e2e",
            "TRACEPARENT": f"00-{HOST_TRACE}-{HOST_SPAN}-01",
        }
        command = ["stdio", "--mcp", "--record", record, "--", sys.executable, server_py, server_spans]
        anyio.run(stdio_session, StdioServerParameters(command=SPILLGUARD, args=command, env=env))
        # The guard has exited; its exit waited for the export: 2 MCP
        # spans, initialize's and tools/list's, and the call span.
        spans = received_spans(received, 4)
    finally:
        receiver.kill()
    ours = {}
    for s in spans:
        ours.setdefault(s["name"], []).append(s)
    theirs = {}
    for line in open(server_spans).read().splitlines():
        span = json.loads(line)
        theirs.setdefault(span["name"], []).append(span)
    line = json.loads(open(record).read().splitlines()[-1])
    client = RESULTS["client"]
    for name, failed in [("tools/call work", False), ("tools/call broken", True)]:
        check(len(ours.get(name, [])) == 1, f"one MCP span {name} from the guard: {list(ours)}")
        check(len(theirs.get(name, [])) == 1, f"one span {name} from the server: {list(theirs)}")
        guard, server = ours[name][0], theirs[name][0]
        a, b = guard["attributes"], server["attributes"]
        check(guard["trace_id"] == client["trace_id"] == server["trace_id"], f"{name}: one trace")
        check(guard["parent_span_id"] == client["span_id"], f"{name}: the guard's span under the client's")
        check(server["parent_id"] == guard["span_id"], f"{name}: the server's span under the guard's")
        check(guard["kind"] == 2, f"{name}: kind SERVER")
        for key in ["mcp.method.name", "gen_ai.tool.name", "gen_ai.operation.name", "jsonrpc.request.id"]:
            check(a.get(key) == b.get(key) is not None, f"{name}: {key} {a.get(key)!r} == {b.get(key)!r}")
        check(a.get("network.transport") == "pipe", f"{name}: network.transport")
        check(a.get("spillguard.call.id") == line["call_id"], f"{name}: names the server's call")
        check(a.get("mcp.session.id") == line["session_id"], f"{name}: mcp.session.id is the call's session")
        check(a.get("error.type") == ("tool_error" if failed else None), f"{name}: error.type {a}")
        check(guard["status"] == (2 if failed else 0), f"{name}: status")
        check(guard["start_ns"] <= guard["end_ns"], f"{name}: times")
    # A request without trace context is under the host's TRACEPARENT,
    # and the server's span for it under the guard's.
    initialize = ours.get("initialize", [])
    check(len(initialize) == 1 and initialize[0]["parent_span_id"] == HOST_SPAN
          and initialize[0]["trace_id"] == HOST_TRACE, f"initialize: under the host's span {initialize}")
    for theirs_initialize in theirs.get("initialize", []):
        check(theirs_initialize["parent_id"] == initialize[0]["span_id"]
              and theirs_initialize["trace_id"] == HOST_TRACE,
              f"the server's initialize under the guard's: {theirs_initialize}")
    print("server spans:", sorted((n, len(v)) for n, v in theirs.items()))
    calls = [s for s in spans if s["span_id"] == line["span_id"]]
    check(len(calls) == 1, "the server's call span, as the record names it")
    c = calls[0]["attributes"]
    check(c.get("spillguard.call.id") == line["call_id"], "call span's call id")
    check(c.get("process.exit.code") == line["exit_status"] == 0, f"call span: exit 0 {c}")
    check(c.get("spillguard.state") == line["state"], "call span: the record's state")
    check(c.get("spillguard.stderr.bytes_seen") == line["stderr_bytes_seen"] > 0,
          f"call span: stderr bytes {c.get('spillguard.stderr.bytes_seen')} vs {line['stderr_bytes_seen']}")
    print(f"stdio --mcp: one trace {client['trace_id']}: client -> guard's tools/call work "
          f"-> server's tools/call work; {len(spans)} spans from the guard, "
          f"{sum(map(len, theirs.values()))} from the server")


async def stdio_session(server):
    provider = TracerProvider()
    tracer = provider.get_tracer("client")
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            with tracer.start_as_current_span("agent step") as client_span:
                carrier = {}
                propagate.inject(carrier)
                RESULTS["client"] = {
                    "trace_id": format(client_span.get_span_context().trace_id, "032x"),
                    "span_id": format(client_span.get_span_context().span_id, "016x"),
                }
                work = await client.call_tool("work", {}, meta=carrier)
                check(not work.is_error, f"work: {work}")
                broken = await client.call_tool("broken", {}, meta=carrier)
                check(broken.is_error, f"broken: {broken}")


async def session(tools, port):
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("client")
    env = dict(os.environ) | {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_SERVICE_NAME": "spillguard-e2e",
    }

    async def approve(context, params):
        from mcp import types
        return types.ElicitResult(action="accept", content={})

    server = StdioServerParameters(command=SPILLGUARD, args=["mcp", "--tools", tools], env=env)
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=approve) as client:
            await client.initialize()
            with tracer.start_as_current_span("agent step") as client_span:
                RESULTS["client_span"] = client_span
                carrier = {}
                propagate.inject(carrier)
                carrier["tracestate"] = "client=1"
                result = await client.call_tool("work", {}, meta=carrier)
                RESULTS["client"] = {
                    "trace_id": format(client_span.get_span_context().trace_id, "032x"),
                    "span_id": format(client_span.get_span_context().span_id, "016x"),
                    "start_ns": client_span.start_time,
                }
                RESULTS["work"] = result
                RESULTS["broken"] = await client.call_tool("broken", {}, meta=carrier)


def check_trace(lines):
    client = RESULTS["client"]
    work = RESULTS["work"]
    check(not work.is_error, f"the work call: {work}")
    helper = json.loads(work.content[0].text)
    record = work.structured_content
    requests = [json.loads(l) for l in lines]
    check(all("error" not in r for r in requests), f"every request decodes: {requests}")
    spans = [s for r in requests for s in r.get("spans", [])]
    by_name = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    mcp_spans = by_name.get("tools/call work", [])
    check(len(mcp_spans) == 1, f"one MCP span for work: {list(by_name)}")
    mcp_span = mcp_spans[0]
    call_span = next(s for s in spans if s["span_id"] == record["span_id"])
    approval = by_name.get("approval", [])
    check(len(approval) == 1, f"one approval span: {list(by_name)}")

    trace_id = client["trace_id"]
    for name, span in [("mcp", mcp_span), ("call", call_span), ("approval", approval[0])]:
        check(span["trace_id"] == trace_id, f"{name} span in the client's trace")
    check(helper["trace_id"] == trace_id, "the helper's span in the client's trace")
    check(mcp_span["parent_span_id"] == client["span_id"], "MCP span under the client span")
    check(call_span["parent_span_id"] == mcp_span["span_id"], "call span under the MCP span")
    check(approval[0]["parent_span_id"] == mcp_span["span_id"], "approval under the MCP span")
    check(helper["parent_id"] == call_span["span_id"], "the helper's span under the call span")
    check(helper["tracestate"] == "client=1", "tracestate passed on to the helper")
    check(record["trace_id"] == trace_id and record["parent_span_id"] == mcp_span["span_id"],
          "the record names the trace and the MCP span")

    a = mcp_span["attributes"]
    check(mcp_span["kind"] == 2, "MCP span kind SERVER")
    check(a.get("mcp.method.name") == "tools/call", "mcp.method.name")
    check(a.get("gen_ai.tool.name") == "work", "gen_ai.tool.name")
    check(a.get("network.transport") == "pipe", "network.transport")
    check(a.get("jsonrpc.request.id") not in (None, ""), "jsonrpc.request.id")
    check(a.get("mcp.session.id") == record["session_id"], "mcp.session.id is the calls' session")
    check("error.type" not in a, "no error on the work call")
    c = call_span["attributes"]
    check(c.get("process.exit.code") == 0 and c.get("spillguard.state") == "completed",
          "call span: exit 0, completed")
    check(c.get("spillguard.call.id") == record["call_id"], "call span's call id")

    broken = by_name.get("tools/call broken", [])
    check(len(broken) == 1, "one MCP span for broken")
    check(broken[0]["attributes"].get("error.type") == "tool_error", "tool_error on an isError result")
    check(broken[0]["status"] == 2, "error status")
    broken_call = next(s for s in spans if s["span_id"] == RESULTS["broken"].structured_content["span_id"])
    check(broken_call["attributes"].get("error.type") == "2", "the broken call's exit code")
    logs = [l for r in requests for l in r.get("logs", [])]
    check(any(l["span_id"] == broken_call["span_id"] and "no route" in l["body"] for l in logs),
          "the broken call's excerpt as a log record on its span")
    if "--svg" in sys.argv:
        client_span = RESULTS["client_span"]
        rows = [("agent step (client, OpenTelemetry SDK)", client_span.start_time, client_span.end_time, 0)]
        rows.append((f"tools/call work (spillguard, MCP span)", mcp_span["start_ns"], mcp_span["end_ns"], 1))
        rows.append(("approval (spillguard)", approval[0]["start_ns"], approval[0]["end_ns"], 2))
        rows.append((f"{call_span['name']} (spillguard, call span)", call_span["start_ns"], call_span["end_ns"], 2))
        rows.append(("helper work (the helper, OpenTelemetry SDK)", helper["start_ns"], helper["end_ns"], 3))
        draw(sys.argv[sys.argv.index("--svg") + 1], trace_id, rows)
    print(f"one trace {trace_id}: client -> tools/call work -> work call -> helper; "
          f"{len(spans)} spans, {len(logs)} log records received")


def draw(path, trace_id, rows):
    """A waterfall of `rows` (name, start ns, end ns, depth), one bar each."""
    t0 = min(r[1] for r in rows)
    t1 = max(r[2] for r in rows)
    width, left, bar_w, row_h = 940, 440, 480, 30
    scale = bar_w / max(t1 - t0, 1)
    height = 60 + row_h * len(rows) + 30
    colours = ["#4c78a8", "#f58518", "#54a24b", "#b279a2"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="12" y="24" font-size="15" font-weight="bold">trace {trace_id}</text>',
           f'<text x="12" y="44" fill="#555">one tools/call from an OpenTelemetry SDK client through '
           f'spillguard mcp to a helper; total {(t1 - t0) / 1e6:.1f} ms</text>']
    for i, (name, start, end, depth) in enumerate(rows):
        y = 60 + i * row_h
        x = left + (start - t0) * scale
        w = max((end - start) * scale, 2)
        out.append(f'<text x="{12 + depth * 16}" y="{y + 19}">{name} '
                   f'<tspan fill="#555">{(end - start) / 1e6:.1f} ms</tspan></text>')
        out.append(f'<rect x="{x:.1f}" y="{y + 6}" width="{w:.1f}" height="18" rx="3" '
                   f'fill="{colours[depth % len(colours)]}"/>')
    axis_y = 60 + row_h * len(rows) + 12
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + bar_w}" y2="{axis_y}" stroke="#999"/>')
    out.append(f'<text x="{left}" y="{axis_y + 16}" fill="#555">0 ms</text>')
    out.append(f'<text x="{left + bar_w - 60}" y="{axis_y + 16}" fill="#555">{(t1 - t0) / 1e6:.1f} ms</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


main()
