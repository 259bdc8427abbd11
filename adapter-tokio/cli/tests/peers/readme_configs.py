"""Every host configuration entry of the package README, run as written.

Usage: python readme_configs.py README BIN_DIR CLAUDE_BIN_DIR TOOLS_FILE CLAUDE

Each `<!-- config: NAME -->` block of README is one host's configuration:

* `mcp-servers` and `vscode` (JSON: `mcpServers` or `servers`) and
  `codex` (TOML: `mcp_servers`): each server entry is started with its
  `command` and `args` by the official MCP Python SDK client, with BIN_DIR
  first on PATH (where an install channel put `spillguard`), and checked:
  the time server answers `get_current_time`, the tools server lists the
  example's tools;
* `claude-code`: each `claude mcp add` line is run by Claude Code itself
  (CLAUDE, in a scratch home), and `claude mcp list` must show every server
  Connected, with CLAUDE_BIN_DIR first on PATH (another channel's
  `spillguard`).

`/etc/spillguard/tools.toml` stands for TOOLS_FILE. Exits non-zero at the
first wrong fact.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

README, BIN_DIR, CLAUDE_BIN_DIR, TOOLS_FILE, CLAUDE = sys.argv[1:6]
TOOLS_FILE = os.path.abspath(TOOLS_FILE)
PLACEHOLDER = "/etc/spillguard/tools.toml"
ENV = dict(os.environ) | {"PATH": f"{BIN_DIR}{os.pathsep}{os.environ['PATH']}"}
CLAUDE_ENV = dict(os.environ) | {"PATH": f"{CLAUDE_BIN_DIR}{os.pathsep}{os.environ['PATH']}"}
checks = 0


def check(cond, what):
    global checks
    if not cond:
        print(f"FAIL {what}", file=sys.stderr)
        sys.exit(1)
    checks += 1
    print(f"ok   {what}")


def blocks(text):
    """The config blocks: name -> the fenced block's text."""
    found = {}
    for match in re.finditer(r"<!-- config: ([a-z-]+) -->\n```[a-z]*\n(.*?)\n```", text, re.S):
        found[match.group(1)] = match.group(2)
    return found


def servers(name, body):
    """(server name, command, args) of a JSON or TOML block."""
    if name == "codex":
        table = tomllib.loads(body)["mcp_servers"]
    else:
        config = json.loads(body)
        table = config["mcpServers"] if name == "mcp-servers" else config["servers"]
        if name == "vscode":
            for entry in table.values():
                check(entry.get("type") == "stdio", f"{name}: every server is a stdio one")
    for server, entry in table.items():
        args = [TOOLS_FILE if a == PLACEHOLDER else a for a in entry["args"]]
        yield server, entry["command"], args


async def drive(label, command, args):
    params = StdioServerParameters(command=command, args=args, env=ENV)
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write):
            async with ClientSession(read, write) as session:
                with anyio.fail_after(60):
                    await session.initialize()
                    names = sorted(t.name for t in (await session.list_tools()).tools)
                    if "get_current_time" in names:
                        result = await session.call_tool("get_current_time", {"timezone": "UTC"})
                        answer = json.loads(result.content[0].text)
                        check(answer.get("timezone") == "UTC", f"{label}: get_current_time answered {answer}")
                    else:
                        check(names == ["list_units", "remote_uptime", "tail_log"], f"{label}: the example's tools {names}")


def claude_code(body):
    home = tempfile.mkdtemp(prefix="spillguard-readme-claude-")
    env = CLAUDE_ENV | {"HOME": home, "CLAUDE_CONFIG_DIR": os.path.join(home, ".claude"), "DISABLE_AUTOUPDATER": "1"}
    names = []
    for line in body.splitlines():
        words = shlex.split(line)
        check(words[:3] == ["claude", "mcp", "add"], f"claude-code: {line!r} is a claude mcp add")
        words = [TOOLS_FILE if w == PLACEHOLDER else w for w in words]
        added = subprocess.run([CLAUDE, *words[1:]], cwd=home, env=env, capture_output=True, text=True, timeout=120)
        check(added.returncode == 0, f"claude-code: {line!r} exit 0 ({added.stderr.strip()[:200]})")
        names.append(words[3])
    listed = subprocess.run([CLAUDE, "mcp", "list"], cwd=home, env=env, capture_output=True, text=True, timeout=180)
    for name in names:
        row = next((l for l in listed.stdout.splitlines() if l.startswith(f"{name}:")), "")
        check("Connected" in row, f"claude-code: claude mcp list shows {name} Connected ({row.strip()})")


async def main():
    with open(README) as f:
        found = blocks(f.read())
    check(sorted(found) == ["claude-code", "codex", "mcp-servers", "vscode"], f"README has every host's block: {sorted(found)}")
    for name in ["mcp-servers", "vscode", "codex"]:
        for server, command, args in servers(name, found[name]):
            check(command == "spillguard", f"{name}/{server}: the command is spillguard")
            await drive(f"{name}/{server}", command, args)
    claude_code(found["claude-code"])
    print(f"readme_configs.py: {checks} checks passed")


anyio.run(main)
