"""Reads a `spillguard run --otel-file` file with OpenTelemetry's own
protocol package (`opentelemetry-proto`, PyPI): every line must parse as an
OTLP/JSON export request (unknown fields refused), and the call's span and
log record must say what the record printed beside them says.

usage: otel_file.py OTEL_FILE RECORD_JSON [PARENT_TRACEPARENT]
Exits non-zero at the first fact that is wrong.
"""

import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def check(fact, what):
    if not fact:
        sys.exit(f"wrong: {what}")


def attributes(item):
    out = {}
    for kv in item.attributes:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind)
    return out


def protobuf_json(line):
    """OTLP/JSON writes trace and span ids in hex where protobuf's own JSON
    mapping has base64 (the one difference the OTLP specification makes):
    the ids are turned back, and anything but lower-case hex of the right
    length fails here."""
    import base64

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str):
                    check(item == "" or (item == item.lower() and len(item) in (16, 32)),
                          f"{key} {item!r} is lower-case hex")
                    value[key] = base64.b64encode(bytes.fromhex(item)).decode()
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    value = json.loads(line)
    walk(value)
    return json.dumps(value)


otel_path, record_path = sys.argv[1], sys.argv[2]
parent = sys.argv[3] if len(sys.argv) > 3 else None
with open(record_path) as f:
    record = json.loads(f.read())
with open(otel_path) as f:
    lines = [line for line in f.read().split("\n") if line]

traces, logs = [], []
for line in lines:
    keys = json.loads(line).keys()
    if "resourceSpans" in keys:
        traces.append(json_format.Parse(protobuf_json(line), ExportTraceServiceRequest()))
    elif "resourceLogs" in keys:
        logs.append(json_format.Parse(protobuf_json(line), ExportLogsServiceRequest()))
    else:
        sys.exit(f"wrong: a line that is neither traces nor logs: {line[:80]}")
check(len(traces) == 1 and len(logs) == 1, f"{len(traces)} trace and {len(logs)} log lines")

resource_spans = traces[0].resource_spans[0]
check(attributes(resource_spans.resource)["service.name"] == "otel-test", "service.name")
check(attributes(resource_spans.resource)["deployment.environment"] == "ci one",
      "OTEL_RESOURCE_ATTRIBUTES, percent-decoded")
span = resource_spans.scope_spans[0].spans[0]
check(resource_spans.scope_spans[0].scope.name == "spillguard", "scope")
check(span.trace_id.hex() == record["trace_id"], "trace id is the record's")
check(span.span_id.hex() == record["span_id"], "span id is the record's")
if parent:
    _, trace_id, parent_id, _ = parent.split("-")
    check(span.trace_id.hex() == trace_id, "the parent's trace")
    check(span.parent_span_id.hex() == parent_id, "the parent span")
else:
    check(span.parent_span_id == b"", "a root span")
check(span.name == "sh", f"span name {span.name!r}")
check(span.kind == 3, "kind CLIENT")
a = attributes(span)
check(a["process.executable.name"] == "sh", "process.executable.name")
check(a["process.exit.code"] == record["exit_status"], "process.exit.code")
check(a["process.pid"] == record["pid"], "process.pid")
check(a["error.type"] == str(record["exit_status"]), "error.type is the exit code")
check(a["spillguard.call.id"] == record["call_id"], "call id")
check(a["spillguard.state"] == record["state"], "state")
check(a["spillguard.stderr.bytes_seen"] == record["stderr_bytes_seen"], "bytes seen")
check(a["spillguard.stderr.bytes_retained"] == record["stderr_bytes_retained"], "bytes retained")
check(a["spillguard.stderr.truncated"] == record["stderr_truncated"], "truncated")
check(a["spillguard.redactions"] == record["stderr_redactions"] + record["stdout_redactions"],
      "redactions")
check(span.status.code == 2 and span.status.message == str(record["exit_status"]), "status")
start = record["received_at_unix_us"] * 1000
check(span.start_time_unix_nano == start, "start is the record's received_at")
end = start + record["timeline"][-1]["offset_us"] * 1000
check(span.end_time_unix_nano == end, "end is the last state's offset")
names = [e.name for e in span.events]
states = [m["state"] for m in record["timeline"]]
check([n for n in names if n in states] == states, f"events {names} hold the timeline {states}")
check("exit" in names, "an exit event")
times = [e.time_unix_nano for e in span.events]
check(times == sorted(times) and times[0] == start, "events in time order from the start")

log = logs[0].resource_logs[0].scope_logs[0].log_records[0]
check(log.trace_id == span.trace_id and log.span_id == span.span_id, "the log is tied to the span")
check(log.body.string_value == record["stderr_excerpt"], "the log is the redacted excerpt")
check("hunter2" not in log.body.string_value and "hunter2" not in "\n".join(lines),
      "the secret is not in the file")
print(f"otel file: 1 span ({len(span.events)} events, {len(a)} attributes), 1 log record; "
      f"trace {span.trace_id.hex()}")
