//! The programs whose words are read in a way of their own: `pwsh`,
//! `cmd`, `env`, `find`, `sudo`, `tmux`, `git`, `docker`, and `ssh` with
//! its remote command.

use super::programs::{ENV, EVALUATING_BUILTINS, SHELLS, SSH, SUDO, names_code};
use super::{Piece, Safe, Scan, Word, program_name};

impl Scan {
    pub(super) fn pwsh(&mut self, w: &[Word], at: usize, prog: &str) {
        const WITH_ARGUMENT: &[&str] = &[
            "executionpolicy",
            "ex",
            "ep",
            "workingdirectory",
            "wd",
            "outputformat",
            "o",
            "of",
            "inputformat",
            "if",
            "configurationname",
            "config",
            "windowstyle",
            "w",
            "custompipename",
            "settingsfile",
            "settings",
            "version",
            "v",
            "psconsolefile",
        ];
        let mut i = at + 1;
        while let Some(word) = w.get(i) {
            let Some(text) = word.literal() else {
                let message = if word.prefix().starts_with(['-', '/']) {
                    format!(
                        "{:?} puts a value in {prog}'s parameters, where it can choose -Command: it must be literal",
                        word.source()
                    )
                } else if prog == "powershell" {
                    format!(
                        "{:?} is code that {prog} runs (its first operand is a command): a value placed there can run commands; {}",
                        word.source(),
                        self.safe_form(w, word, Safe::Pwsh)
                    )
                } else {
                    format!(
                        "{:?} chooses what {prog} runs (its script): it must be literal",
                        word.source()
                    )
                };
                self.refuse(word, message);
                return;
            };
            let Some(name) = text.strip_prefix(['-', '/']).map(str::to_ascii_lowercase) else {
                if prog == "powershell" {
                    self.rest_code(w, i, prog, "its first operand is a command");
                }
                return;
            };
            if name.is_empty() {
                return;
            }
            if "command".starts_with(&name) && name != "co" || name == "c" {
                self.pwsh_code(w, i + 1, prog, &text);
                return;
            }
            if "encodedcommand".starts_with(&name) || name == "ec" {
                self.pwsh_code(w, i + 1, prog, &text);
                return;
            }
            if "file".starts_with(&name) {
                if let Some(script) = w.get(i + 1) {
                    self.select(script, prog, &text);
                }
                return;
            }
            i += if WITH_ARGUMENT.contains(&name.as_str()) {
                2
            } else {
                1
            };
        }
    }

    pub(super) fn pwsh_code(&mut self, w: &[Word], from: usize, prog: &str, how: &str) {
        for word in w.iter().skip(from) {
            if word.has_param() {
                let message = format!(
                    "{:?} is code that {prog} runs ({how}: every word after it is joined into the command): \
                     a value placed there can run commands; {}",
                    word.source(),
                    if self.remote {
                        "a value is not allowed there".to_owned()
                    } else {
                        self.safe_form(w, word, Safe::Pwsh)
                    }
                );
                self.refuse(word, message);
            }
        }
    }

    pub(super) fn cmd(&mut self, w: &[Word], at: usize) {
        for (i, word) in w.iter().enumerate().skip(at + 1) {
            match word.literal() {
                Some(text) if ["/c", "/k", "/r"].contains(&text.to_ascii_lowercase().as_str()) => {
                    self.rest_code(w, i + 1, "cmd", &text);
                    return;
                }
                Some(_) => {}
                None => {
                    self.rest_code(w, i, "cmd", "a switch or its command");
                    return;
                }
            }
        }
    }

    pub(super) fn env(&mut self, w: &[Word], at: usize) {
        let walk = self.options(w, at + 1, "env", &ENV, Safe::None);
        // `-S STRING`: the string is split into words that come first.
        let split = (at + 1..walk.operand).find_map(|i| {
            let text = w[i].literal()?;
            let rest = if text == "-S" || text == "--split-string" {
                w.get(i + 1)?.literal()?
            } else if let Some(rest) = text.strip_prefix("--split-string=") {
                rest.to_owned()
            } else if text.starts_with('-') && !text.starts_with("--") && text.contains('S') {
                let (_, rest) = text.split_once('S')?;
                if rest.is_empty() {
                    w.get(i + 1)?.literal()?
                } else {
                    rest.to_owned()
                }
            } else {
                return None;
            };
            Some((i, rest))
        });
        let mut i = walk.operand;
        let mut words: Vec<Word> = Vec::new();
        if let Some((origin, string)) = split {
            words.extend(string.split_whitespace().map(|piece| Word {
                origin: w[origin].origin,
                pieces: vec![Piece::Text(piece.to_owned())],
                dash: false,
            }));
        }
        words.extend(w[i.min(w.len())..].iter().cloned());
        i = 0;
        while let Some(word) = words.get(i) {
            let prefix = word.prefix();
            match prefix.split_once('=') {
                Some((name, _)) if !name.is_empty() && !name.starts_with('-') => {
                    if word.has_param() && names_code(name) {
                        let message = format!(
                            "{:?} sets {name}, which names code that a program loads or runs: it must be literal",
                            word.source()
                        );
                        self.refuse(word, message);
                    }
                    i += 1;
                }
                _ => break,
            }
        }
        self.command(&words, i, Some("env"));
    }

    pub(super) fn find(&mut self, w: &[Word], at: usize) {
        let mut i = at + 1;
        while i < w.len() {
            let action = w[i].literal();
            if matches!(
                action.as_deref(),
                Some("-exec" | "-execdir" | "-ok" | "-okdir")
            ) {
                let end = (i + 1..w.len())
                    .find(|&j| matches!(w[j].literal().as_deref(), Some(";" | "+")))
                    .unwrap_or(w.len());
                self.command(&w[..end], i + 1, Some("find"));
                i = end;
            }
            i += 1;
        }
    }

    pub(super) fn sudo(&mut self, w: &[Word], at: usize) {
        let walk = self.options(w, at + 1, "sudo", &SUDO, Safe::None);
        let shell = (at + 1..walk.operand).any(|i| {
            w[i].literal().is_some_and(|t| {
                t == "--shell"
                    || t == "--login"
                    || (t.starts_with('-') && !t.starts_with("--") && t.contains(['s', 'i']))
            })
        });
        if shell {
            self.rest_code(
                w,
                walk.operand,
                "sudo",
                "-s/-i run the command through a shell",
            );
        } else {
            self.command(w, walk.operand, Some("sudo"));
        }
    }

    pub(super) fn multiplexer(&mut self, w: &[Word], at: usize, prog: &str) {
        let mut i = at + 1;
        while let Some(word) = w.get(i) {
            if matches!(word.literal().as_deref(), Some("-t" | "-s" | "-S" | "-n")) {
                i += 2;
                continue;
            }
            self.code(w, word, prog, "its commands run shell commands", Safe::None);
            i += 1;
        }
    }

    pub(super) fn git(&mut self, w: &[Word], at: usize) {
        let mut i = at + 1;
        let mut subcommand = false;
        while let Some(word) = w.get(i) {
            let prefix = word.prefix();
            if !subcommand && matches!(word.literal().as_deref(), Some("-c" | "--config-env")) {
                if let Some(value) = w.get(i + 1) {
                    self.code(
                        w,
                        value,
                        "git",
                        "configuration such as core.sshCommand or alias.*=! runs commands",
                        Safe::None,
                    );
                }
                i += 2;
                continue;
            }
            if !subcommand
                && matches!(
                    word.literal().as_deref(),
                    Some("-C" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path")
                )
            {
                i += 2;
                continue;
            }
            if !subcommand
                && (prefix.starts_with("-c") || prefix.starts_with("--config-env="))
                && prefix.len() > 2
                && word.has_param()
            {
                self.code(
                    w,
                    word,
                    "git",
                    "configuration such as core.sshCommand runs commands",
                    Safe::None,
                );
            } else if ["--upload-pack", "--receive-pack", "--exec", "--extcmd"]
                .iter()
                .any(|o| prefix == *o || prefix.starts_with(&format!("{o}=")))
            {
                if prefix.contains('=') {
                    self.code(
                        w,
                        word,
                        "git",
                        prefix.split('=').next().unwrap_or(prefix),
                        Safe::None,
                    );
                } else if let Some(value) = w.get(i + 1) {
                    self.code(w, value, "git", prefix, Safe::None);
                    i += 1;
                }
            } else if !subcommand && !prefix.starts_with('-') {
                subcommand = true;
                self.select(word, "git", "its subcommand, or an alias");
            }
            i += 1;
        }
    }

    /// `docker`/`kubectl`: a recognised program after the subcommand.
    pub(super) fn container(&mut self, w: &[Word], at: usize, prog: &str) {
        // The entrypoint, and what `kubectl exec … --` runs, choose the
        // program.
        for i in at + 1..w.len() {
            let word = &w[i];
            if word.literal().as_deref() == Some("--entrypoint") {
                if let Some(next) = w.get(i + 1) {
                    self.select(next, prog, "--entrypoint");
                }
            } else if word.prefix().starts_with("--entrypoint=") {
                self.select(word, prog, "--entrypoint");
            } else if word.literal().as_deref() == Some("--") && matches!(prog, "kubectl" | "oc") {
                self.command(w, i + 1, Some(prog));
                return;
            }
        }
        for i in at + 2..w.len() {
            let Some(text) = w[i].literal() else { continue };
            let name = program_name(&text);
            if SHELLS.contains(&name.as_str())
                || matches!(
                    name.as_str(),
                    "fish"
                        | "python"
                        | "pypy"
                        | "node"
                        | "nodejs"
                        | "bun"
                        | "deno"
                        | "perl"
                        | "ruby"
                        | "php"
                        | "lua"
                        | "rscript"
                        | "awk"
                        | "gawk"
                        | "mawk"
                        | "sed"
                        | "env"
                        | "xargs"
                        | "pwsh"
                        | "powershell"
                        | "busybox"
                        | "sudo"
                        | "su"
                        | "timeout"
                        | "find"
                )
            {
                self.command(w, i, Some(prog));
                return;
            }
        }
    }

    pub(super) fn ssh(&mut self, w: &[Word], at: usize) {
        let walk = self.options(w, at + 1, "ssh", &SSH, Safe::None);
        // Options may follow the destination too.
        let after = self.options(w, walk.operand + 1, "ssh", &SSH, Safe::None);
        if walk.operand >= w.len() {
            return;
        }
        self.remote_command(w, after.operand);
    }

    /// `ssh`'s remote command, `w[from..]`.
    pub(super) fn remote_command(&mut self, w: &[Word], from: usize) {
        if from >= w.len() {
            return;
        }
        let last = (from..w.len()).rev().find(|&i| w[i].has_param());
        let Some(last) = last else { return };
        let mut syntax: Option<(String, char)> = None;
        let mut words: Vec<Word> = Vec::new();
        for word in &w[from..] {
            match word.literal() {
                Some(text) => {
                    if word.origin < w[last].origin
                        && syntax.is_none()
                        && let Some(c) = text.chars().find(|c| "'\"\\$#{}()[];|&\n\r`".contains(*c))
                    {
                        syntax = Some((text.clone(), c));
                    }
                    words.extend(text.split_whitespace().map(|piece| Word {
                        origin: word.origin,
                        pieces: vec![Piece::Text(piece.to_owned())],
                        dash: false,
                    }));
                }
                None => {
                    let joined = word.pieces.iter().find_map(|p| match p {
                        Piece::Text(t) => t
                            .chars()
                            .find(|c| !(c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(*c))),
                        Piece::Param(_) => None,
                    });
                    if let Some(c) = joined {
                        let message = format!(
                            "{:?} joins a value to {c:?}, which ssh's remote shell reads as syntax: \
                             a value there could run commands; put the placeholder in a word of its own \
                             (joined only to letters, digits and _ @ % + = : , . / -)",
                            word.source()
                        );
                        self.refuse(word, message);
                    } else if let Some((text, c)) = &syntax {
                        let message = format!(
                            "{:?} follows {text:?} in ssh's remote command, and {c:?} is shell syntax that \
                             could put the value inside quotes, a comment or another command: put words \
                             holding shell syntax after the last placeholder",
                            word.source()
                        );
                        self.refuse(word, message);
                    } else {
                        self.out.remote.push(word.origin);
                    }
                    words.push(word.clone());
                }
            }
        }
        // The remote command, as the remote shell splits it: assignments,
        // then a program.
        let mut i = 0;
        while let Some(word) = words.get(i) {
            match word.prefix().split_once('=') {
                Some((name, _))
                    if !name.is_empty()
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    if word.has_param() && names_code(name) {
                        let message = format!(
                            "{:?} sets {name}, which names code that a program loads or runs: it must be literal",
                            word.source()
                        );
                        self.refuse(word, message);
                    }
                    i += 1;
                }
                _ => break,
            }
        }
        let outer = std::mem::replace(&mut self.remote, true);
        let program = words.get(i).and_then(Word::literal);
        // `printf -v NAME` assigns to NAME, whose subscript bash evaluates.
        let printf_v = program.as_deref() == Some("printf")
            && words.get(i + 1).and_then(Word::literal).as_deref() == Some("-v");
        if let Some(program) = program
            && (EVALUATING_BUILTINS.contains(&program.as_str()) || printf_v)
        {
            self.rest_code(
                &words,
                i + 1,
                &program,
                "a shell builtin that evaluates its arguments",
            );
        } else {
            self.command(&words, i, Some("ssh"));
        }
        self.remote = outer;
    }
}
