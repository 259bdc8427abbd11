//! Keeps an MCP stdio server's stdout protocol-only: see [`StdoutLineGuard`].

/// Splits the stdout of an MCP stdio server into the lines the client gets
/// and the lines it must not.
///
/// Over stdio, MCP messages are JSON-RPC objects, one per line. A server
/// that prints anything else on stdout (a banner, a log line, a stray
/// `print`) breaks its client. The guard is fed each chunk of the server's
/// stdout as it is read and splits it into segments, in order:
///
/// * [`Segment::Forward`]: bytes of lines whose first byte that is not
///   leading whitespace is `{`: a JSON object, sent on to the client;
/// * [`Segment::Divert`]: every other byte, to be kept with the server's
///   diagnostics (hand it to
///   [`Call::handle_stdout_diverted`](crate::Call::handle_stdout_diverted),
///   which feeds the stderr capture).
///
/// The rules, decided once and the same for every chunking:
///
/// * A line ends at `\n`, which belongs to it. A `\r` before it is part of
///   the line (`\r\n` lines pass as they are; JSON allows the `\r`).
/// * Leading whitespace (spaces, tabs, `\r`) comes before the byte that
///   decides the line, so it cannot wait for the decision without a buffer:
///   it is always diverted. A JSON line is forwarded from its `{`.
/// * An empty or blank line (only leading whitespace, then `\n`) is not a
///   message: it is diverted, and counts as a diverted line.
/// * Bytes after the deciding byte are never looked at except to find the
///   line's end, so a line of any length (a 64 MiB JSON message) passes
///   without being held: memory is constant, nothing is copied, and no
///   chunk allocates. Forwarded segments are subslices of the chunk.
///
/// Consume every segment of a chunk before feeding the next: the guard's
/// state follows the segments taken. Every byte lands in exactly one
/// segment.
///
/// # Examples
///
/// ```
/// use spillguard_core::{Segment, StdoutLineGuard};
///
/// let mut guard = StdoutLineGuard::new();
/// let mut forwarded = Vec::new();
/// let mut diverted = Vec::new();
/// for chunk in [&b"server v1.2 starting\n{\"jsonrpc\":"[..], b"\"2.0\",\"id\":1}\n  \n"] {
///     for segment in guard.split(chunk) {
///         match segment {
///             Segment::Forward(bytes) => forwarded.extend_from_slice(bytes),
///             Segment::Divert(d) => diverted.extend_from_slice(d.bytes),
///         }
///     }
/// }
/// assert_eq!(forwarded, b"{\"jsonrpc\":\"2.0\",\"id\":1}\n");
/// assert_eq!(diverted, b"server v1.2 starting\n  \n");
/// assert_eq!((guard.lines_forwarded(), guard.lines_diverted()), (1, 2));
/// ```
#[derive(Debug, Clone, Default)]
pub struct StdoutLineGuard {
    line: Line,
    lines_forwarded: u64,
    lines_diverted: u64,
}

/// Where the current line stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Line {
    /// At its start, or in its leading whitespace: not decided yet.
    #[default]
    Undecided,
    /// A JSON object line, forwarded to its end.
    Forward,
    /// Any other line, diverted to its end.
    Divert,
}

/// One run of bytes of a stdout chunk, all going the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment<'a> {
    /// Bytes of JSON object lines, for the client: a subslice of the chunk.
    Forward(&'a [u8]),
    /// Bytes that are not protocol, for the diagnostics.
    Divert(Diverted<'a>),
}

/// Diverted bytes of an MCP server's stdout, with the number of lines
/// decided as diverted within them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Diverted<'a> {
    /// The bytes: a subslice of the chunk.
    pub bytes: &'a [u8],
    /// Lines decided as not protocol in these bytes (a line counts once,
    /// in the segment holding its deciding byte, or its `\n` for a blank
    /// line). Leading whitespace of a JSON line counts no line.
    pub lines: u64,
}

impl StdoutLineGuard {
    /// A guard at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// The segments of `chunk`, in order. See the type's docs.
    pub fn split<'a, 'g>(&'g mut self, chunk: &'a [u8]) -> Segments<'a, 'g> {
        Segments {
            guard: self,
            rest: chunk,
        }
    }

    /// JSON object lines begun so far.
    pub fn lines_forwarded(&self) -> u64 {
        self.lines_forwarded
    }

    /// Lines decided as not protocol so far.
    pub fn lines_diverted(&self) -> u64 {
        self.lines_diverted
    }
}

/// The segments of one chunk; see [`StdoutLineGuard::split`].
#[derive(Debug)]
pub struct Segments<'a, 'g> {
    guard: &'g mut StdoutLineGuard,
    rest: &'a [u8],
}

impl<'a> Iterator for Segments<'a, '_> {
    type Item = Segment<'a>;

    fn next(&mut self) -> Option<Segment<'a>> {
        let chunk = self.rest;
        let first = *chunk.first()?;
        let guard = &mut *self.guard;
        let forward = match guard.line {
            Line::Forward => true,
            Line::Divert => false,
            Line::Undecided => first == b'{',
        };
        let (mut end, mut lines) = (0, 0);
        while end < chunk.len() {
            if guard.line == Line::Undecided {
                let byte = chunk[end];
                if (byte == b'{') != forward {
                    break;
                }
                match byte {
                    b'{' => {
                        guard.line = Line::Forward;
                        guard.lines_forwarded += 1;
                    }
                    // A blank line ends: it carried no message.
                    b'\n' => lines += 1,
                    b' ' | b'\t' | b'\r' => {}
                    _ => {
                        guard.line = Line::Divert;
                        lines += 1;
                    }
                }
                end += 1;
            } else {
                // A decided line goes the segment's way up to its end.
                match chunk[end..].iter().position(|&b| b == b'\n') {
                    Some(newline) => {
                        end += newline + 1;
                        guard.line = Line::Undecided;
                    }
                    None => end = chunk.len(),
                }
            }
        }
        let (bytes, rest) = chunk.split_at(end);
        self.rest = rest;
        if forward {
            Some(Segment::Forward(bytes))
        } else {
            guard.lines_diverted += lines;
            Some(Segment::Divert(Diverted { bytes, lines }))
        }
    }
}
