"""A real client: the official MCP Python SDK calls `spillguard mcp` tools
that have limits and a sandbox. The approval card states each tool's
bounds, and each call is held to them: a tool that touches 4 GiB under
256 MiB ends with limit_hit "memory"; a sandboxed tool reads the path it
is given and is refused (EACCES) any other.

Usage: python mcp_limits.py PATH/TO/spillguard
Exits non-zero at the first wrong fact.
"""

import os
import sys
import tempfile

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

SPILLGUARD = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="spillguard-mcp-limits-")
ALLOWED = os.path.join(WORK, "allowed")
OTHER = os.path.join(WORK, "other")


def equal(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def tools_file():
    os.makedirs(ALLOWED)
    os.makedirs(OTHER)
    with open(os.path.join(ALLOWED, "notes"), "w") as f:
        f.write("allowed\n")
    with open(os.path.join(OTHER, "secret"), "w") as f:
        f.write("hidden\n")
    path = os.path.join(WORK, "tools.toml")
    with open(path, "w") as f:
        f.write(f"""
[defaults.limits]
pids_max = 32

[tools.hog]
description = "touch MB mebibytes of memory"
command = ["/usr/bin/python3", "-c", "import sys; x = bytearray(int(sys.argv[1]) << 20); x[::4096] = b'x' * (len(x) // 4096)", "{{mb}}"]
params.mb = {{ type = "integer", minimum = 1, maximum = 8192 }}
approval = "required"
[tools.hog.limits]
memory_max = "256M"

[tools.read]
description = "print FILE"
command = ["cat", "--", "{{file}}"]
params.file = {{ type = "string", pattern = "^/tmp/[A-Za-z0-9_./-]+$" }}
approval = "required"
[tools.read.sandbox]
read_only = ["{ALLOWED}"]
network = "none"
""")
    return path


class Approver:
    def __init__(self):
        self.cards = []

    async def __call__(self, context, params):
        self.cards.append(params.message)
        return types.ElicitResult(action="accept", content={})


async def main():
    tools = tools_file()
    approver = Approver()
    params = StdioServerParameters(command=SPILLGUARD, args=["mcp", "--tools", tools])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=approver) as client:
            await client.initialize()

            result = await client.call_tool("hog", {"mb": 4096})
            sc = result.structured_content
            card = approver.cards[-1]
            check("\nlimits: memory 256 MiB, 32 processes\n" in card, f"the hog card states its limits: {card!r}")
            equal(result.is_error, True, "hog isError")
            equal(sc["state"], "failed_local", "hog state")
            equal(sc["exit_signal"], 9, "hog signal")
            equal(sc["limit_hit"], "memory", "hog limit_hit")
            equal(sc["limits"]["memory_max"], 256 << 20, "hog limits")
            check(sc["tree_peak_memory_bytes"] <= 256 << 20, f"hog peak {sc['tree_peak_memory_bytes']}")

            result = await client.call_tool("read", {"file": os.path.join(ALLOWED, "notes")})
            card = approver.cards[-1]
            check(f"\nsandbox: read-only {ALLOWED}; network none\n" in card, f"the read card states its sandbox: {card!r}")
            check("\nlimits: 32 processes\n" in card, f"the read card states the default limits: {card!r}")
            equal(result.is_error, False, "read isError")
            equal(result.structured_content["result"], "allowed\n", "read result")
            check("netns" in result.structured_content["enforced"], "network none by a namespace")

            result = await client.call_tool("read", {"file": os.path.join(OTHER, "secret")})
            sc = result.structured_content
            equal(result.is_error, True, "read of another path: isError")
            equal(sc["exit_status"], 1, "cat's exit status")
            check("Permission denied" in sc["stderr_excerpt"], f"EACCES: {sc['stderr_excerpt']!r}")
            check("hidden" not in result.content[0].text, "the other file's text never shows")
    print(f"mcp limits: {len(approver.cards)} cards stated their bounds; memory and sandbox held")


anyio.run(main)
