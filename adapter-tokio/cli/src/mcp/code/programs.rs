//! The programs the check recognises: how each reads its options, and
//! which of their arguments are code (`mod.rs` states the rule).

use super::{Arg, Spec, spec};

pub(super) const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash", "pdksh", "oksh",
    "lksh", "csh", "tcsh", "hush",
];

pub(super) const SH: Spec = Spec {
    short: &[('o', Arg::Data), ('O', Arg::Data)],
    long: &[
        ("rcfile", Arg::Select),
        ("init-file", Arg::Select),
        ("command", Arg::Code),
    ],
    flag_code: Some('c'),
    flag_stdin: Some('s'),
    plus: true,
};
pub(super) const FISH: Spec = spec(
    &[
        ('c', Arg::Code),
        ('C', Arg::Code),
        ('d', Arg::Data),
        ('o', Arg::Data),
        ('D', Arg::Data),
    ],
    &[
        ("command", Arg::Code),
        ("init-command", Arg::Code),
        ("debug", Arg::Data),
        ("debug-output", Arg::Data),
        ("features", Arg::Data),
    ],
);
pub(super) const PYTHON: Spec = spec(
    &[
        ('c', Arg::CodeEnd),
        ('m', Arg::SelectEnd),
        ('W', Arg::Data),
        ('X', Arg::Data),
    ],
    &[("check-hash-based-pycs", Arg::Data)],
);
pub(super) const NODE: Spec = spec(
    &[
        ('e', Arg::Code),
        ('p', Arg::Code),
        ('r', Arg::Select),
        ('C', Arg::Data),
    ],
    &[
        ("eval", Arg::Code),
        ("print", Arg::Code),
        ("require", Arg::Select),
        ("import", Arg::Select),
        ("loader", Arg::Select),
        ("experimental-loader", Arg::Select),
        ("preload", Arg::Select),
        ("env-file", Arg::Select),
        ("title", Arg::Data),
        ("conditions", Arg::Data),
        ("input-type", Arg::Data),
    ],
);
pub(super) const PERL: Spec = spec(
    &[
        ('e', Arg::Code),
        ('E', Arg::Code),
        ('M', Arg::Select),
        ('m', Arg::Select),
        ('I', Arg::Data),
        ('l', Arg::Digits),
        ('0', Arg::Digits),
        ('C', Arg::Digits),
        ('d', Arg::Attached),
        ('D', Arg::Attached),
        ('i', Arg::Attached),
        ('x', Arg::Attached),
    ],
    &[],
);
pub(super) const RUBY: Spec = spec(
    &[
        ('e', Arg::Code),
        ('r', Arg::Select),
        ('I', Arg::Data),
        ('C', Arg::Data),
        ('E', Arg::Data),
        ('0', Arg::Digits),
        ('F', Arg::Attached),
        ('i', Arg::Attached),
        ('K', Arg::Attached),
        ('T', Arg::Digits),
        ('W', Arg::Attached),
        ('x', Arg::Attached),
    ],
    &[("require", Arg::Select)],
);
pub(super) const PHP: Spec = spec(
    &[
        ('r', Arg::Code),
        ('B', Arg::Code),
        ('R', Arg::Code),
        ('E', Arg::Code),
        ('d', Arg::Code),
        ('f', Arg::Select),
        ('F', Arg::Select),
        ('z', Arg::Select),
        ('c', Arg::Data),
        ('t', Arg::Data),
        ('S', Arg::Data),
    ],
    &[
        ("run", Arg::Code),
        ("process-begin", Arg::Code),
        ("process-code", Arg::Code),
        ("process-end", Arg::Code),
        ("define", Arg::Code),
        ("file", Arg::Select),
        ("process-file", Arg::Select),
        ("zend-extension", Arg::Select),
    ],
);
pub(super) const LUA: Spec = spec(
    &[
        ('e', Arg::Code),
        ('l', Arg::Select),
        ('j', Arg::Code),
        ('b', Arg::Data),
    ],
    &[],
);
pub(super) const RSCRIPT: Spec = spec(
    &[('e', Arg::Code), ('f', Arg::Select)],
    &[("file", Arg::Select)],
);
pub(super) const OSASCRIPT: Spec =
    spec(&[('e', Arg::Code), ('l', Arg::Data), ('s', Arg::Data)], &[]);
pub(super) const JULIA: Spec = spec(
    &[
        ('e', Arg::Code),
        ('E', Arg::Code),
        ('L', Arg::Select),
        ('J', Arg::Select),
        ('t', Arg::Data),
        ('p', Arg::Data),
    ],
    &[
        ("eval", Arg::Code),
        ("print", Arg::Code),
        ("load", Arg::Select),
        ("sysimage", Arg::Select),
        ("project", Arg::Select),
    ],
);
pub(super) const EXPECT: Spec = spec(&[('c', Arg::Code), ('f', Arg::Select)], &[]);
pub(super) const AWK: Spec = spec(
    &[
        ('F', Arg::Data),
        ('v', Arg::Data),
        ('f', Arg::Select),
        ('e', Arg::Code),
        ('E', Arg::SelectEnd),
        ('i', Arg::Select),
        ('l', Arg::Select),
        ('W', Arg::Data),
    ],
    &[
        ("field-separator", Arg::Data),
        ("assign", Arg::Data),
        ("file", Arg::Select),
        ("source", Arg::Code),
        ("exec", Arg::SelectEnd),
        ("include", Arg::Select),
        ("load", Arg::Select),
    ],
);
pub(super) const SED: Spec = spec(
    &[
        ('e', Arg::Code),
        ('f', Arg::Select),
        ('l', Arg::Data),
        ('i', Arg::Attached),
    ],
    &[
        ("expression", Arg::Code),
        ("file", Arg::Select),
        ("line-length", Arg::Data),
    ],
);
pub(super) const SSH: Spec = spec(
    &[
        ('B', Arg::Data),
        ('b', Arg::Data),
        ('c', Arg::Data),
        ('D', Arg::Data),
        ('E', Arg::Data),
        ('e', Arg::Data),
        ('F', Arg::Select),
        ('I', Arg::Select),
        ('i', Arg::Data),
        ('J', Arg::Data),
        ('L', Arg::Data),
        ('l', Arg::Data),
        ('m', Arg::Data),
        ('O', Arg::Data),
        ('o', Arg::SshOption),
        ('P', Arg::Data),
        ('p', Arg::Data),
        ('Q', Arg::Data),
        ('R', Arg::Data),
        ('S', Arg::Data),
        ('W', Arg::Data),
        ('w', Arg::Data),
    ],
    &[],
);
pub(super) const ENV: Spec = spec(
    &[
        ('u', Arg::Data),
        ('C', Arg::Data),
        ('P', Arg::Select),
        ('S', Arg::Code),
    ],
    &[
        ("unset", Arg::Data),
        ("chdir", Arg::Data),
        ("split-string", Arg::Code),
    ],
);
pub(super) const XARGS: Spec = spec(
    &[
        ('a', Arg::Data),
        ('d', Arg::Data),
        ('E', Arg::Data),
        ('e', Arg::Attached),
        ('I', Arg::Data),
        ('i', Arg::Attached),
        ('L', Arg::Data),
        ('l', Arg::Attached),
        ('n', Arg::Data),
        ('P', Arg::Data),
        ('s', Arg::Data),
    ],
    &[
        ("arg-file", Arg::Data),
        ("delimiter", Arg::Data),
        ("eof", Arg::Data),
        ("replace", Arg::Data),
        ("max-lines", Arg::Data),
        ("max-args", Arg::Data),
        ("max-procs", Arg::Data),
        ("max-chars", Arg::Data),
        ("process-slot-var", Arg::Data),
    ],
);
pub(super) const SUDO: Spec = spec(
    &[
        ('C', Arg::Data),
        ('D', Arg::Data),
        ('g', Arg::Data),
        ('h', Arg::Data),
        ('p', Arg::Data),
        ('R', Arg::Data),
        ('r', Arg::Data),
        ('t', Arg::Data),
        ('T', Arg::Data),
        ('U', Arg::Data),
        ('u', Arg::Data),
        ('c', Arg::Data),
    ],
    &[
        ("close-from", Arg::Data),
        ("chdir", Arg::Data),
        ("group", Arg::Data),
        ("host", Arg::Data),
        ("prompt", Arg::Data),
        ("chroot", Arg::Data),
        ("role", Arg::Data),
        ("type", Arg::Data),
        ("command-timeout", Arg::Data),
        ("other-user", Arg::Data),
        ("user", Arg::Data),
    ],
);
pub(super) const SU: Spec = spec(
    &[
        ('c', Arg::Code),
        ('s', Arg::Select),
        ('g', Arg::Data),
        ('G', Arg::Data),
        ('w', Arg::Data),
        ('u', Arg::Data),
    ],
    &[
        ("command", Arg::Code),
        ("session-command", Arg::Code),
        ("shell", Arg::Select),
        ("group", Arg::Data),
        ("supp-group", Arg::Data),
        ("whitelist-environment", Arg::Data),
        ("user", Arg::Data),
    ],
);
pub(super) const SCRIPT: Spec = spec(
    &[
        ('c', Arg::Code),
        ('E', Arg::Data),
        ('I', Arg::Data),
        ('O', Arg::Data),
        ('B', Arg::Data),
        ('T', Arg::Data),
        ('m', Arg::Data),
        ('t', Arg::Attached),
    ],
    &[
        ("command", Arg::Code),
        ("echo", Arg::Data),
        ("log-in", Arg::Data),
        ("log-out", Arg::Data),
        ("log-io", Arg::Data),
        ("log-timing", Arg::Data),
        ("logging-format", Arg::Data),
        ("output-limit", Arg::Data),
    ],
);

/// Wrappers that run a command after their options and a fixed number of
/// operands: (name, options, operands before the command).
pub(super) const WRAPPERS: &[(&str, Spec, usize)] = &[
    (
        "timeout",
        spec(
            &[('s', Arg::Data), ('k', Arg::Data)],
            &[("signal", Arg::Data), ("kill-after", Arg::Data)],
        ),
        1,
    ),
    (
        "nice",
        spec(&[('n', Arg::Data)], &[("adjustment", Arg::Data)]),
        0,
    ),
    ("nohup", spec(&[], &[]), 0),
    ("setsid", spec(&[], &[]), 0),
    ("command", spec(&[], &[]), 0),
    ("exec", spec(&[('a', Arg::Data)], &[]), 0),
    (
        "time",
        spec(
            &[('f', Arg::Data), ('o', Arg::Data)],
            &[("format", Arg::Data), ("output", Arg::Data)],
        ),
        0,
    ),
    (
        "stdbuf",
        spec(
            &[('i', Arg::Data), ('o', Arg::Data), ('e', Arg::Data)],
            &[
                ("input", Arg::Data),
                ("output", Arg::Data),
                ("error", Arg::Data),
            ],
        ),
        0,
    ),
    (
        "ionice",
        spec(
            &[
                ('c', Arg::Data),
                ('n', Arg::Data),
                ('p', Arg::Data),
                ('P', Arg::Data),
                ('u', Arg::Data),
            ],
            &[("class", Arg::Data), ("classdata", Arg::Data)],
        ),
        0,
    ),
    ("chrt", spec(&[], &[]), 1),
    ("taskset", spec(&[], &[]), 1),
    (
        "chroot",
        spec(&[], &[("userspec", Arg::Data), ("groups", Arg::Data)]),
        1,
    ),
    (
        "doas",
        spec(&[('u', Arg::Data), ('C', Arg::Select)], &[]),
        0,
    ),
    (
        "setpriv",
        spec(
            &[],
            &[
                ("reuid", Arg::Data),
                ("regid", Arg::Data),
                ("groups", Arg::Data),
                ("inh-caps", Arg::Data),
                ("ambient-caps", Arg::Data),
                ("bounding-set", Arg::Data),
                ("securebits", Arg::Data),
                ("selinux-label", Arg::Data),
                ("apparmor-profile", Arg::Data),
            ],
        ),
        0,
    ),
];

pub(super) const FLOCK: Spec = spec(
    &[('c', Arg::Code), ('w', Arg::Data), ('E', Arg::Data)],
    &[
        ("command", Arg::Code),
        ("timeout", Arg::Data),
        ("wait", Arg::Data),
        ("conflict-exit-code", Arg::Data),
    ],
);
pub(super) const WATCH: Spec = spec(
    &[('n', Arg::Data), ('q', Arg::Data)],
    &[
        ("interval", Arg::Data),
        ("equexit", Arg::Data),
        ("differences", Arg::Attached),
    ],
);

/// Environment variables whose value names code that a program loads or
/// runs, or chooses which program runs.
pub(super) const CODE_VARIABLES: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONWARNINGS",
    "PYTHONBREAKPOINT",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "PAGER",
    "EDITOR",
    "VISUAL",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
    "MANPAGER",
    "PATH",
    "SHELL",
    "GCONV_PATH",
];
pub(super) const CODE_VARIABLE_PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_", "GIT_"];

pub(super) fn names_code(variable: &str) -> bool {
    let upper = variable.to_ascii_uppercase();
    CODE_VARIABLES.contains(&upper.as_str())
        || CODE_VARIABLE_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// Shell builtins that read an argument as code (or as a name that
/// arithmetic evaluates): a placeholder anywhere after them is code.
pub(super) const EVALUATING_BUILTINS: &[&str] = &[
    "eval",
    "let",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "source",
    ".",
    "trap",
    "alias",
    "read",
    "unset",
    "mapfile",
    "readarray",
    "[[",
    "((",
    "fc",
    "bind",
    "complete",
    "compgen",
];
