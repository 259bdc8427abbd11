//! No placeholder inside code: which words of a tool's command a program
//! runs as code, checked when the tools file is loaded.
//!
//! A value is one argument and no shell reads it (`prepare.rs`); but an
//! interpreter given an argument as code reads that argument as a program.
//! A `{param}` placeholder inside such a word is a load error, whatever the
//! parameter's `pattern` or `enum`: `["sh", "-c", "echo hello {name}"]`
//! with `name = "x; echo pwn"` would run the second command. The error
//! names the word and shows the safe form, the value passed as an argument
//! the code reads (`["sh", "-c", "echo hello \"$1\"", "_", "{name}"]`).
//! No key switches the rule off.
//!
//! # What is refused
//!
//! A program is recognised by its base name, lower-cased, without `.exe`
//! and without a version suffix of digits and dots (`/usr/bin/python3.11`
//! is `python`, `bash5` is `bash`). Options are read as the program reads
//! them: combined short flags (`-ec`, `-Bc`, `-lne`), options that take an
//! argument (`-o pipefail`, `-W ignore`), `--name=value`, and `--`. For
//! every recognised program:
//!
//! * a placeholder in the word that is its **code** (table below);
//! * a placeholder in a word that **chooses what runs**: a script or
//!   module an interpreter runs (`python {script}`, `perl -M{module}`), the
//!   program a wrapper runs (`env {prog}`, `sudo {prog}`), a program's
//!   configuration that names commands (`ssh -F {file}`);
//! * a word in its options that a value may begin with `-` (the parameter
//!   sets `allow_leading_dash`, or the word comes after the command's
//!   `--`): the value could be an option that runs code (`-c`, `-e`,
//!   `-oProxyCommand=…`);
//! * a placeholder joined to a short option (`-e{flags}`): its value adds
//!   options.
//!
//! | program | code |
//! |---|---|
//! | `sh` `bash` `dash` `zsh` `ksh` `mksh` `ash` `yash` `posh` `rbash` `pdksh` `oksh` `lksh` `csh` `tcsh` `hush` | with `-c` (alone or combined, `-ec`), the first operand; words after it are `$0`, `$1`… (data) |
//! | `fish` | the argument of `-c`/`--command` and `-C`/`--init-command` |
//! | `python` `pypy` `jython` `ipython` | the argument of `-c` |
//! | `node` `nodejs` `bun` | the argument of `-e`/`--eval`, `-p`/`--print` |
//! | `deno` | the first operand after `eval`; `--eval` |
//! | `perl` | the argument of `-e`/`-E` (also `-ne`, `-lne`…); `-M`/`-m` choose code |
//! | `ruby` | the argument of `-e` |
//! | `php` | the argument of `-r`, `-B`, `-R`, `-E`, `-d` |
//! | `lua` `luajit` | the argument of `-e` |
//! | `rscript` `r` | the argument of `-e` |
//! | `osascript` | the argument of `-e` |
//! | `julia` | the argument of `-e`/`-E` |
//! | `expect` | the argument of `-c` |
//! | `pwsh` `powershell` | `-Command`/`-c` (any prefix, any case) and every word after it; `-EncodedCommand`; for `powershell`, a first operand |
//! | `cmd` | every word after `/c`, `/k` or `/r` |
//! | `awk` `gawk` `mawk` `nawk` | the program, the first operand (unless `-f`); `-e`/`--source` |
//! | `sed` `gsed` | the script, the first operand (unless `-e`/`-f`); `-e`/`--expression` |
//! | `watch` | every word after its options |
//! | `tmux` `screen` | every word, but the argument of `-t`, `-s`, `-S`, `-n` |
//! | `su` `runuser` | `-c`/`--command`/`--session-command`; every word after the user |
//! | `script` | `-c`/`--command` |
//! | `flock` | `-c`/`--command` |
//! | `sg` | every word after the group |
//! | `parallel` | every word before `:::` |
//! | `git` | the argument of `-c`, `--config-env`, `--upload-pack`, `--receive-pack`, `--exec` |
//! | `env` | the argument of `-S`/`--split-string`; a variable that names code (`LD_PRELOAD`, `BASH_ENV`, `PYTHONPATH`, `NODE_OPTIONS`, `PATH`…) |
//! | `ssh` | a `-o` option that runs a command (`ProxyCommand`, `LocalCommand`, `RemoteCommand`, `KnownHostsCommand`, `Match`); the remote command (below) |
//!
//! Wrappers are looked through: what `env`, `xargs`, `find -exec`/
//! `-execdir`/`-ok`/`-okdir`, `timeout`, `nice`, `nohup`, `setsid`,
//! `stdbuf`, `ionice`, `chrt`, `taskset`, `chroot`, `flock`, `sudo`,
//! `doas`, `busybox`, `toybox`, `command`, `exec`, `time` and `setpriv`
//! run is checked as a command of its own, and its program must be
//! literal. `sudo -s`/`-i` runs its command through a shell: every word
//! after its options is code. `docker`, `podman`, `nerdctl`, `kubectl`
//! and `oc` are searched for a recognised program after their subcommand
//! (`docker exec box sh -c …`, `kubectl exec pod -- sh -c …`); their
//! `--entrypoint`, and the program after `kubectl exec … --`, must be
//! literal. (The image a `docker run` starts is not located: its options
//! are too many to read exactly.)
//!
//! # `ssh`: the remote command
//!
//! `ssh` joins every word after the destination with spaces and hands the
//! line to the remote account's login shell. A placeholder there is passed
//! **quoted for a POSIX shell**: the value becomes one single-quoted word,
//! each `'` written `'\''`, so `;`, `$( )`, backticks and newlines are
//! literal text for the remote shell (a newline inside single quotes is
//! part of the word), and the remote program receives the value as one
//! argument. A NUL byte cannot be passed at all (refused, as everywhere).
//! A placeholder may be joined to plain text (`--state={state}` becomes
//! `--state='running'`): letters, digits and `_ @ % + = : , . / -`. Refused:
//!
//! * a placeholder joined to other text (a quote, `$`, a space…);
//! * a placeholder after literal remote words that hold shell syntax
//!   (`' " \ $ # { } ( ) [ ] ; | &` or a line break), which could put the
//!   value inside quotes, a comment or a second command; such words may
//!   come after the last placeholder;
//! * a placeholder as the remote program, or in code the remote command
//!   runs (`ssh host sh -c {x}`): the remote command is checked as a
//!   command of its own; after a shell builtin that evaluates its
//!   arguments (`eval`, `let`, `declare`, `typeset`, `local`, `export`,
//!   `readonly`, `source`, `.`, `trap`, `alias`, `read`, `unset`,
//!   `mapfile`, `readarray`, `[[`, `((`, `fc`, `bind`, `complete`,
//!   `compgen`, `printf -v`), every placeholder is code;
//! * a placeholder in a variable assignment that names code
//!   (`LD_PRELOAD={x} ls`, as for `env`).
//!
//! The quoting assumes a POSIX login shell (`sh`, `bash`, `dash`, `ksh`,
//! `zsh`); `fish` and `csh` read quotes differently.
//!
//! What code does with the arguments it is given is the code's own
//! (`sh -c 'eval "$1"'` runs its value): the rule guards the boundary where
//! a value would become code by being pasted into it.

use super::template::{Piece, Template};

mod programs;
mod safe;
#[cfg(test)]
mod tests;
mod wrappers;

use programs::{
    AWK, EXPECT, FISH, FLOCK, JULIA, LUA, NODE, OSASCRIPT, PERL, PHP, PYTHON, RSCRIPT, RUBY,
    SCRIPT, SED, SH, SHELLS, SU, WATCH, WRAPPERS, XARGS,
};

/// One refused word: its index in the command (0 is the program) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The word's index in `command`.
    pub(crate) word: usize,
    /// What is wrong, with the safe form when there is one.
    pub(crate) message: String,
}

/// What the check found in one command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Analysis {
    /// Every refused word, in the order found.
    pub(crate) refusals: Vec<Refusal>,
    /// The argument words (indices in `command`, 0 the program) whose
    /// values are quoted for a remote POSIX shell: `ssh`'s remote command.
    pub(crate) remote: Vec<usize>,
}

/// One word of a command as the check sees it.
#[derive(Debug, Clone)]
struct Word {
    /// Its index in the tool's command.
    origin: usize,
    pieces: Vec<Piece>,
    /// Whether a value may begin it with `-`.
    dash: bool,
}

impl Word {
    fn literal(&self) -> Option<String> {
        let mut text = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => text.push_str(t),
                Piece::Param(_) => return None,
            }
        }
        Some(text)
    }

    fn has_param(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Param(_)))
    }

    /// The literal text before the first placeholder.
    fn prefix(&self) -> &str {
        match self.pieces.first() {
            Some(Piece::Text(t)) => t,
            _ => "",
        }
    }

    /// The word as written in the tools file.
    fn source(&self) -> String {
        source(&self.pieces)
    }
}

/// Pieces written back as template text.
fn source(pieces: &[Piece]) -> String {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.push_str(&t.replace('{', "{{").replace('}', "}}")),
            Piece::Param(name) => {
                out.push('{');
                out.push_str(name);
                out.push('}');
            }
        }
    }
    out
}

/// Checks a tool's command: `words[0]` is the program, the rest its
/// arguments; `dash[i]` says whether a value may begin word `i` with `-`.
pub(crate) fn analyse(words: &[&Template], dash: &[bool]) -> Analysis {
    let words: Vec<Word> = words
        .iter()
        .enumerate()
        .map(|(i, t)| Word {
            origin: i,
            pieces: t.pieces.clone(),
            dash: dash.get(i).copied().unwrap_or(false),
        })
        .collect();
    let mut scan = Scan {
        all: words.clone(),
        out: Analysis::default(),
        remote: false,
    };
    scan.command(&words, 0, None);
    scan.out.refusals.sort_by_key(|r| r.word);
    scan.out.refusals.dedup_by_key(|r| r.word);
    scan.out.remote.sort_unstable();
    scan.out.remote.dedup();
    scan.out
}

/// A program's name as the check compares it: the base name, lower-cased,
/// without `.exe` and a trailing version (`python3.11` → `python`).
pub(crate) fn program_name(text: &str) -> String {
    let base = text.rsplit('/').next().unwrap_or(text).to_lowercase();
    let base = base.strip_suffix(".exe").unwrap_or(&base);
    let trimmed = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let trimmed = trimmed.strip_suffix('-').unwrap_or(trimmed);
    if trimmed.is_empty() {
        base.to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// What an option's argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    /// Data: any value.
    Data,
    /// Code the program runs.
    Code,
    /// Code, and the program reads no more options (`python -c`).
    CodeEnd,
    /// It chooses what runs (a script, a module, a file of commands).
    Select,
    /// It chooses what runs, and no more options follow (`python -m`).
    SelectEnd,
    /// The rest of the short cluster is its argument (`-i.bak`), data.
    Attached,
    /// Digits may follow in the cluster (`perl -l0`), then more flags.
    Digits,
    /// An `ssh -o` option: code when it names a command.
    SshOption,
}

/// How a program reads its options.
struct Spec {
    short: &'static [(char, Arg)],
    long: &'static [(&'static str, Arg)],
    /// A short flag that makes the first operand code (`sh -c`).
    flag_code: Option<char>,
    /// A short flag that makes every operand data (`sh -s`).
    flag_stdin: Option<char>,
    /// Whether `+x` clusters are options too (shells).
    plus: bool,
}

const fn spec(short: &'static [(char, Arg)], long: &'static [(&'static str, Arg)]) -> Spec {
    Spec {
        short,
        long,
        flag_code: None,
        flag_stdin: None,
        plus: false,
    }
}

/// Where the options of a program ended.
#[derive(Debug, Default)]
struct Walk {
    /// The first operand's index (the length when there is none).
    operand: usize,
    /// The code flag was given (`-c`).
    code_flag: bool,
    /// The stdin flag was given (`-s`).
    stdin_flag: bool,
    /// An option gave the code or chose what runs (`-e`, `-f`, `-m`).
    given: bool,
    /// The option list ended at an option that ends it (`python -c`).
    stopped: bool,
    /// The option list ended at `--`.
    ended: bool,
}

/// How the safe form passes a value to code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Safe {
    /// `$1` after a `$0` word.
    Sh,
    /// `$argv[1]`.
    Fish,
    /// `sys.argv[1]`.
    Python,
    /// `process.argv[1]`.
    Node,
    /// `$ARGV[0]`.
    Perl,
    /// `ARGV[0]`.
    Ruby,
    /// `$argv[1]`.
    Php,
    /// `-v name={name}` before the program.
    Awk,
    /// A script run with `-File`, reading `$args[0]`.
    Pwsh,
    /// No safe way to pass a value into this code.
    None,
}

struct Scan {
    all: Vec<Word>,
    out: Analysis,
    /// Inside `ssh`'s remote command: no local safe form applies.
    remote: bool,
}

impl Scan {
    fn refuse(&mut self, word: &Word, message: String) {
        self.out.refusals.push(Refusal {
            word: word.origin,
            message,
        });
    }

    /// `w[at]` is a program; check it and what it runs. `by` names the
    /// program that runs it (a wrapper).
    fn command(&mut self, w: &[Word], at: usize, by: Option<&str>) {
        let Some(word) = w.get(at) else { return };
        let Some(text) = word.literal() else {
            let message = match by {
                Some(by) if self.remote => format!(
                    "{:?} chooses the program that {by}'s remote shell runs: it must be literal",
                    word.source()
                ),
                Some(by) => format!(
                    "{:?} chooses the program that {by} runs: it must be literal",
                    word.source()
                ),
                None => format!("{:?} chooses what runs: it must be literal", word.source()),
            };
            self.refuse(word, message);
            return;
        };
        let name = program_name(&text);
        let prog = name.as_str();
        match prog {
            _ if SHELLS.contains(&prog) => self.shell(w, at, prog),
            "fish" => self.interp(w, at, prog, &FISH, Operand::Script, Safe::Fish),
            "busybox" | "toybox" => self.command(w, at + 1, Some(prog)),
            "python" | "pypy" | "jython" | "ipython" => {
                self.interp(w, at, prog, &PYTHON, Operand::Script, Safe::Python)
            }
            "node" | "nodejs" => self.interp(w, at, prog, &NODE, Operand::Script, Safe::Node),
            "bun" => self.interp(w, at, prog, &NODE, Operand::Subcommand, Safe::Node),
            "deno" => self.interp(w, at, prog, &NODE, Operand::Subcommand, Safe::None),
            "perl" => self.interp(w, at, prog, &PERL, Operand::Script, Safe::Perl),
            "ruby" => self.interp(w, at, prog, &RUBY, Operand::Script, Safe::Ruby),
            "php" => self.interp(w, at, prog, &PHP, Operand::Script, Safe::Php),
            "lua" | "luajit" => self.interp(w, at, prog, &LUA, Operand::Script, Safe::None),
            "rscript" | "r" => self.interp(w, at, prog, &RSCRIPT, Operand::Script, Safe::None),
            "osascript" => self.interp(w, at, prog, &OSASCRIPT, Operand::Script, Safe::None),
            "julia" => self.interp(w, at, prog, &JULIA, Operand::Script, Safe::None),
            "expect" => self.interp(w, at, prog, &EXPECT, Operand::Script, Safe::None),
            "tclsh" | "wish" => {
                self.interp(w, at, prog, &spec(&[], &[]), Operand::Script, Safe::None)
            }
            "awk" | "gawk" | "mawk" | "nawk" => {
                self.interp(w, at, prog, &AWK, Operand::Program, Safe::Awk)
            }
            "sed" | "gsed" => {
                let (operands, given) = self.permuted(w, at + 1, prog, &SED, Safe::None);
                if !given && let Some(&first) = operands.first() {
                    self.code(w, &w[first], prog, "its script", Safe::None);
                }
            }
            "pwsh" | "powershell" => self.pwsh(w, at, prog),
            "cmd" => self.cmd(w, at),
            "env" => self.env(w, at),
            "xargs" => {
                let walk = self.options(w, at + 1, prog, &XARGS, Safe::None);
                self.command(w, walk.operand, Some(prog));
            }
            "find" | "gfind" => self.find(w, at),
            "sudo" => self.sudo(w, at),
            "flock" => {
                let walk = self.options(w, at + 1, prog, &FLOCK, Safe::None);
                if !walk.given {
                    let again = self.options(w, walk.operand + 1, prog, &FLOCK, Safe::None);
                    if !again.given {
                        self.command(w, again.operand, Some(prog));
                    }
                }
            }
            "watch" => {
                let walk = self.options(w, at + 1, prog, &WATCH, Safe::None);
                self.rest_code(w, walk.operand, prog, "its command runs through sh -c");
            }
            "su" | "runuser" => {
                let (operands, _) = self.permuted(w, at + 1, prog, &SU, Safe::None);
                let operands: Vec<usize> = operands
                    .into_iter()
                    .filter(|&i| w[i].literal().as_deref() != Some("-"))
                    .collect();
                for &i in operands.iter().skip(1) {
                    self.code(
                        w,
                        &w[i],
                        prog,
                        "words after the user go to the user's shell",
                        Safe::None,
                    );
                }
            }
            "script" => {
                self.permuted(w, at + 1, prog, &SCRIPT, Safe::None);
            }
            "sg" => self.rest_code(w, at + 2, prog, "its command runs through sh -c"),
            "tmux" | "screen" => self.multiplexer(w, at, prog),
            "parallel" => {
                let end = (at + 1..w.len())
                    .find(|&i| {
                        matches!(
                            w[i].literal().as_deref(),
                            Some(":::" | "::::" | ":::+" | "::::+")
                        )
                    })
                    .unwrap_or(w.len());
                self.rest_code(&w[..end], at + 1, prog, "its command runs through a shell");
            }
            "git" => self.git(w, at),
            "ssh" => self.ssh(w, at),
            "docker" | "podman" | "nerdctl" | "kubectl" | "oc" => self.container(w, at, prog),
            _ => {
                if let Some((_, spec, operands)) = WRAPPERS.iter().find(|(n, _, _)| *n == prog) {
                    let walk = self.options(w, at + 1, prog, spec, Safe::None);
                    self.command(w, walk.operand + operands, Some(prog));
                }
            }
        }
    }

    /// Every word from `from` on is code.
    fn rest_code(&mut self, w: &[Word], from: usize, prog: &str, how: &str) {
        for word in w.iter().skip(from) {
            self.code(w, word, prog, how, Safe::None);
        }
    }

    /// Refuses a placeholder in `word`, code that `prog` runs.
    fn code(&mut self, w: &[Word], word: &Word, prog: &str, how: &str, safe: Safe) {
        if !word.has_param() {
            return;
        }
        let advice = if self.remote {
            "a value is not allowed there".to_owned()
        } else {
            self.safe_form(w, word, safe)
        };
        let message = format!(
            "{:?} is code that {prog} runs ({how}): a value placed there can run commands; {advice}",
            word.source()
        );
        self.refuse(word, message);
    }

    fn select(&mut self, word: &Word, prog: &str, how: &str) {
        if word.has_param() {
            let message = format!(
                "{:?} chooses what {prog} runs ({how}): it must be literal",
                word.source()
            );
            self.refuse(word, message);
        }
    }

    /// Reads `prog`'s options from `w[from]`, checking each option's
    /// argument; returns where the operands begin.
    fn options(&mut self, w: &[Word], from: usize, prog: &str, spec: &Spec, safe: Safe) -> Walk {
        let mut walk = Walk::default();
        let mut i = from;
        while let Some(word) = w.get(i) {
            let prefix = word.prefix();
            let literal = word.literal();
            let is_option = (prefix.starts_with('-') || (spec.plus && prefix.starts_with('+')))
                && prefix.len() > 1;
            if literal.as_deref() == Some("--") {
                walk.operand = i + 1;
                walk.ended = true;
                return walk;
            }
            if !is_option {
                if word.dash {
                    let message = format!(
                        "{:?} is where {prog} reads its options, and a value there may begin with \"-\" \
                         (allow_leading_dash, or a word after the command's \"--\"): an option can make \
                         {prog} run code; set no allow_leading_dash there",
                        word.source()
                    );
                    self.refuse(word, message);
                }
                walk.operand = i;
                return walk;
            }
            let mut next = i + 1;
            if let Some(body) = prefix.strip_prefix("--") {
                let (name, inline) = match body.split_once('=') {
                    Some((name, _)) => (name, true),
                    None => (body, false),
                };
                if word.has_param() && !inline {
                    self.cluster(word, prog);
                } else if let Some(&(_, arg)) = spec.long.iter().find(|(n, _)| *n == name) {
                    let how = format!("--{name}");
                    let target = if inline {
                        Some(i)
                    } else {
                        next += 1;
                        Some(i + 1)
                    };
                    if let Some(t) = target {
                        self.argument(w, t, arg, prog, &how, safe, &mut walk);
                    }
                    if matches!(arg, Arg::CodeEnd | Arg::SelectEnd) {
                        walk.stopped = true;
                        walk.operand = next;
                        return walk;
                    }
                }
                i = next;
                continue;
            }
            // A cluster of short options: `-euc`, `-W ignore`, `-e{x}`.
            let letters: Vec<char> = prefix.chars().skip(1).collect();
            let mut consumed = false;
            let mut k = 0;
            while k < letters.len() {
                let c = letters[k];
                if spec.flag_code == Some(c) {
                    walk.code_flag = true;
                } else if spec.flag_stdin == Some(c) {
                    walk.stdin_flag = true;
                }
                match spec.short.iter().find(|(l, _)| *l == c).map(|&(_, a)| a) {
                    None => {}
                    Some(Arg::Digits) => {
                        while k + 1 < letters.len() && letters[k + 1].is_ascii_digit() {
                            k += 1;
                        }
                    }
                    Some(Arg::Attached) => {
                        consumed = true;
                        break;
                    }
                    Some(arg) => {
                        let rest = k + 1 < letters.len() || word.has_param();
                        let how = format!("-{c}");
                        let target = if rest {
                            i
                        } else {
                            next += 1;
                            i + 1
                        };
                        self.argument(w, target, arg, prog, &how, safe, &mut walk);
                        consumed = true;
                        if matches!(arg, Arg::CodeEnd | Arg::SelectEnd) {
                            walk.stopped = true;
                            walk.operand = next;
                            return walk;
                        }
                        break;
                    }
                }
                k += 1;
            }
            if !consumed && word.has_param() {
                self.cluster(word, prog);
            }
            i = next;
        }
        walk.operand = i;
        walk
    }

    /// Reads options anywhere among the operands, as GNU `getopt` does
    /// (`su user -c CMD`); returns the operands and whether an option gave
    /// the code or chose what runs.
    fn permuted(
        &mut self,
        w: &[Word],
        from: usize,
        prog: &str,
        spec: &Spec,
        safe: Safe,
    ) -> (Vec<usize>, bool) {
        let mut operands = Vec::new();
        let mut given = false;
        let mut i = from;
        loop {
            let walk = self.options(w, i, prog, spec, safe);
            given |= walk.given;
            if walk.ended || walk.stopped {
                operands.extend(walk.operand..w.len());
                return (operands, given);
            }
            if walk.operand >= w.len() {
                return (operands, given);
            }
            operands.push(walk.operand);
            i = walk.operand + 1;
        }
    }

    fn cluster(&mut self, word: &Word, prog: &str) {
        let message = format!(
            "{:?} puts a value among {prog}'s options, where it can add an option that runs code: \
             pass it as its own word",
            word.source()
        );
        self.refuse(word, message);
    }

    /// Checks an option's argument, `w[at]`.
    #[allow(clippy::too_many_arguments)]
    fn argument(
        &mut self,
        w: &[Word],
        at: usize,
        arg: Arg,
        prog: &str,
        how: &str,
        safe: Safe,
        walk: &mut Walk,
    ) {
        let Some(word) = w.get(at) else { return };
        match arg {
            Arg::Data | Arg::Attached | Arg::Digits => {}
            Arg::Code | Arg::CodeEnd => {
                walk.given = true;
                self.code(w, word, prog, how, safe);
            }
            Arg::Select | Arg::SelectEnd => {
                walk.given = true;
                self.select(word, prog, how);
            }
            Arg::SshOption => {
                if !word.has_param() {
                    return;
                }
                // The option's name is the word (or the rest of `-o…`) up to
                // `=` or a space.
                let text = word.prefix();
                let text = text.strip_prefix("-o").unwrap_or(text);
                match text.split_once(['=', ' ']) {
                    None => {
                        let message = format!(
                            "{:?} chooses an ssh option, and some run commands (ProxyCommand): the option's name must be literal",
                            word.source()
                        );
                        self.refuse(word, message);
                    }
                    Some((name, _)) => {
                        let lower = name.trim().to_ascii_lowercase();
                        if lower.ends_with("command") || lower == "match" {
                            self.code(w, word, prog, &format!("-o {}", name.trim()), Safe::None);
                        } else if lower == "include" {
                            self.select(word, prog, "-o Include");
                        }
                    }
                }
            }
        }
    }

    fn shell(&mut self, w: &[Word], at: usize, prog: &str) {
        let walk = self.options(w, at + 1, prog, &SH, Safe::Sh);
        let Some(word) = w.get(walk.operand) else {
            return;
        };
        if walk.code_flag {
            self.code(w, word, prog, "-c", Safe::Sh);
        } else if !walk.stdin_flag && !walk.given && word.literal().as_deref() != Some("-") {
            self.select(word, prog, "its script");
        }
    }

    fn interp(
        &mut self,
        w: &[Word],
        at: usize,
        prog: &str,
        spec: &Spec,
        operand: Operand,
        safe: Safe,
    ) {
        let walk = self.options(w, at + 1, prog, spec, safe);
        if walk.stopped || walk.given {
            return;
        }
        let Some(word) = w.get(walk.operand) else {
            return;
        };
        match operand {
            Operand::Script => {
                if word.literal().as_deref() != Some("-") {
                    self.select(word, prog, "its script");
                }
            }
            Operand::Program => self.code(w, word, prog, "its program", safe),
            Operand::Subcommand => match word.literal().as_deref() {
                Some("eval") => {
                    let walk = self.options(w, walk.operand + 1, prog, spec, safe);
                    if !walk.given
                        && let Some(code) = w.get(walk.operand)
                    {
                        self.code(w, code, prog, "eval", Safe::None);
                    }
                }
                Some("exec") => self.rest_code(w, walk.operand + 1, prog, "exec"),
                Some(sub) if !sub.contains(['.', '/']) => {
                    let walk = self.options(w, walk.operand + 1, prog, spec, safe);
                    if !walk.given
                        && let Some(script) = w.get(walk.operand)
                    {
                        self.select(script, prog, sub);
                    }
                }
                _ => self.select(word, prog, "its script"),
            },
        }
    }
}

/// Where an interpreter's operand leads when no option gave the code.
#[derive(Debug, Clone, Copy)]
enum Operand {
    /// The first operand is the script it runs.
    Script,
    /// The first operand is code (`awk`, `sed`).
    Program,
    /// The first operand is a subcommand (`deno eval`, `bun run`).
    Subcommand,
}

/// `value` as one word for a POSIX shell: single-quoted, each `'`
/// written `'\''`.
pub(crate) fn sh_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}
