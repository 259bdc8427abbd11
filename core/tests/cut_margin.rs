//! The context margin beyond each cut edge: the rules read the dropped
//! bytes next to the window (never shown), so a secret that straddles an
//! edge is redacted by its rule over its visible part, ordinary text cut
//! by an edge is shown, and only a word longer than the margin that could
//! hold a secret is hidden as `[cut]`.
#![allow(clippy::unwrap_used)]

use spillguard_core::{
    CUT_MARGIN, CaptureSettings, MAX_CUT_HIDDEN, RedactionCounts, Retain, RetentionPool,
    StreamCapture, StreamName,
};

fn capture(retain: Retain, budget: usize, head_bytes: usize, input: &[u8]) -> StreamCapture {
    let settings = CaptureSettings {
        retain,
        head_bytes,
        ..CaptureSettings::tail(StreamName::Stderr, budget)
    };
    let mut capture = StreamCapture::new(settings, &RetentionPool::unlimited());
    let _ = capture.feed(input);
    capture
}

/// The rendering, the same fed byte by byte, with its counts.
fn render(
    retain: Retain,
    budget: usize,
    head_bytes: usize,
    input: &[u8],
) -> (String, RedactionCounts) {
    let whole = capture(retain, budget, head_bytes, input)
        .window()
        .render_with_redactions();
    let settings = CaptureSettings {
        retain,
        head_bytes,
        ..CaptureSettings::tail(StreamName::Stderr, budget)
    };
    let mut bytewise = StreamCapture::new(settings, &RetentionPool::unlimited());
    for b in input.chunks(1) {
        let _ = bytewise.feed(b);
    }
    assert_eq!(bytewise.window().render_with_redactions(), whole);
    let finished = bytewise.finish().render_with_redactions();
    assert_eq!(finished, whole);
    whole
}

/// Ordinary log lines, `n` bytes of them.
fn prose(n: usize) -> String {
    "the deploy step finished reading its configuration and waits\n"
        .chars()
        .cycle()
        .take(n)
        .collect()
}

const TOKEN_BODY: &str = "Q7x9K2m4P8z3W6v1a5B0c3D8e2F6g4H1j9Kq";

#[test]
fn a_thousand_digits_in_a_200_byte_head_show_as_digits() {
    let digits: String = "0123456789".repeat(100);
    let (text, counts) = render(Retain::Head, 200, 0, digits.as_bytes());
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept first 200 of 1000 bytes]\n{}",
            &digits[..200]
        )
    );
    assert_eq!((counts.total(), counts.cut_words()), (0, 0));
}

#[test]
fn a_github_token_cut_by_a_tail_window_is_redacted_by_its_rule() {
    assert_eq!(TOKEN_BODY.len(), 36);
    let before = prose(1000);
    let input = format!("{before}push refused for ghp_{TOKEN_BODY} at origin\n");
    // The window starts 20 bytes into the token's 40.
    let token_at = before.len() + "push refused for ".len();
    let budget = input.len() - token_at - 20;
    let (text, counts) = render(Retain::Tail, budget, 0, input.as_bytes());
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last {budget} of {} bytes]\n[redacted: github-token] at origin\n",
            input.len()
        )
    );
    assert_eq!(
        (
            counts.rule("github-token"),
            counts.total(),
            counts.cut_words()
        ),
        (1, 1, 0)
    );

    // The same token cut by a head window: its visible half is redacted.
    let head = token_at + 20;
    let (text, counts) = render(Retain::Head, head, 0, input.as_bytes());
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept first {head} of {} bytes]\n{before}push refused for [redacted: github-token]",
            input.len()
        )
    );
    assert_eq!((counts.rule("github-token"), counts.cut_words()), (1, 0));
}

#[test]
fn an_assignment_whose_key_is_in_the_margin_is_redacted_by_its_rule() {
    let before = prose(2000);
    let input = format!("{before}db: password=Xk29fQ7mZpL4 connecting\n");
    // The window starts at the value: `password=` was dropped.
    let value_at = before.len() + "db: password=".len();
    let budget = input.len() - value_at;
    let (text, counts) = render(Retain::Tail, budget, 0, input.as_bytes());
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last {budget} of {} bytes]\n[redacted: password-assignment] connecting\n",
            input.len()
        )
    );
    assert_eq!(
        (
            counts.rule("password-assignment"),
            counts.total(),
            counts.cut_words()
        ),
        (1, 1, 0)
    );
}

#[test]
fn a_word_longer_than_the_margin_that_could_hold_a_secret_is_cut() {
    let word: String = "aZ09+/bY18xW27".chars().cycle().take(3000).collect();
    let before = prose(700);
    let input = format!("{before}{word} done here\n");
    // 2,000 bytes of the word were dropped (with the prose): its last
    // 1,000 bytes open the window.
    let budget = 1000 + " done here\n".len();
    let (text, counts) = render(Retain::Tail, budget, 0, input.as_bytes());
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last {budget} of {} bytes]\n[cut] done here\n",
            input.len()
        )
    );
    assert_eq!((counts.total(), counts.cut_words()), (0, 1));

    // A cut hides at most MAX_CUT_HIDDEN bytes from the margin's outer
    // edge: with 2,000 of the word visible, its last 464 show.
    let budget = 2000 + " done here\n".len();
    let (text, _) = render(Retain::Tail, budget, 0, input.as_bytes());
    let shown = MAX_CUT_HIDDEN - CUT_MARGIN;
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last {budget} of {} bytes]\n[cut]{} done here\n",
            input.len(),
            &word[1000 + shown..]
        )
    );
}

#[test]
fn prose_cut_mid_word_shows_the_word() {
    let text = prose(3000);
    // The tail starts inside "configuration", the head ends inside it.
    let at = 2000 + text[2000..].find("configuration").unwrap() + 6;
    let (out, counts) = render(Retain::Tail, text.len() - at, 0, text.as_bytes());
    assert_eq!(
        out,
        format!(
            "[stderr truncated: kept last {} of 3000 bytes]\n{}",
            text.len() - at,
            &text[at..]
        )
    );
    assert!(text[at..].starts_with("uration and waits\n"));
    assert_eq!((counts.total(), counts.cut_words()), (0, 0));
    let (out, _) = render(Retain::Head, at, 0, text.as_bytes());
    assert_eq!(
        out,
        format!(
            "[stderr truncated: kept first {at} of 3000 bytes]\n{}",
            &text[..at]
        )
    );
    assert!(text[..at].ends_with("its config"));
    // Both inner edges of head_and_tail.
    let (out, counts) = render(Retain::HeadAndTail, 1000, 500, text.as_bytes());
    assert_eq!(
        out,
        format!(
            "{}\n[stderr truncated: kept first 500 and last 500 of 3000 bytes, 2000 omitted between them]\n{}",
            &text[..500],
            &text[2500..]
        )
    );
    assert_eq!(counts.cut_words(), 0);
}

#[test]
fn a_json_line_cut_inside_a_value_shows_the_value() {
    let mut line = String::from("{\"level\":\"info\",\"msg\":\"");
    line.push_str(&prose(900).replace('\n', " "));
    line.push_str("\",\"request_id\":\"7f3a9c1e-55d2-4b8e-9a61-0c2d4e6f8a10\"}\n");
    let budget = 120;
    let (out, counts) = render(Retain::Tail, budget, 0, line.as_bytes());
    assert_eq!(
        out,
        format!(
            "[stderr truncated: kept last {budget} of {} bytes]\n{}",
            line.len(),
            &line[line.len() - budget..]
        )
    );
    assert_eq!((counts.total(), counts.cut_words()), (0, 0));
}

#[test]
fn a_private_key_body_whose_begin_line_is_in_the_margin_is_redacted() {
    let body: Vec<String> = (0..6)
        .map(|i| {
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
                .chars()
                .cycle()
                .skip(i * 7)
                .take(64)
                .collect()
        })
        .collect();
    let block = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\nbye\n",
        body.join("\n")
    );
    let input = format!("{}{block}", prose(1500));
    // The window starts in the middle of the third body line.
    let at = 1500 + "-----BEGIN PRIVATE KEY-----\n".len() + 2 * 65 + 30;
    let budget = input.len() - at;
    let (out, counts) = render(Retain::Tail, budget, 0, input.as_bytes());
    assert_eq!(
        out,
        format!(
            "[stderr truncated: kept last {budget} of {} bytes]\n[redacted: private-key]-----END PRIVATE KEY-----\nbye\n",
            input.len()
        )
    );
    assert_eq!((counts.rule("private-key"), counts.cut_words()), (1, 0));
}

#[test]
fn a_clamp_edge_reads_the_retained_bytes_beyond_it_as_its_margin() {
    // One long line of prose: no line boundary, the clamp cuts inside a
    // word ("configuration") and shows its end.
    let text = prose(4000).replace('\n', " ");
    let capture = capture(Retain::Tail, 4096, 0, text.as_bytes());
    let out = capture.window().render_clamped(100);
    assert_eq!(
        out,
        format!(
            "[stderr truncated: kept last 51 of 4000 bytes]\n{}",
            &text[3949..]
        )
    );
    assert!(text[3949..].starts_with("ation and waits the deploy"));
    // A base64 word longer than the margin cut by the clamp is hidden.
    let word: String = "aZ09+/bY18xW27".chars().cycle().take(3000).collect();
    let input = format!("{word} end\n");
    let capture = capture_of(&input);
    let out = capture.window().render_clamped(100);
    assert_eq!(
        out,
        "[stderr truncated: kept last 51 of 3005 bytes]\n[cut] end\n"
    );
}

fn capture_of(input: &str) -> StreamCapture {
    capture(Retain::Tail, 4096, 0, input.as_bytes())
}

#[test]
fn margins_are_reserved_from_the_pool_once_bytes_are_dropped() {
    let pool = RetentionPool::unlimited();
    let settings = CaptureSettings::tail(StreamName::Stderr, 1000);
    let mut c = StreamCapture::new(settings.clone(), &pool);
    let _ = c.feed(&[b'x'; 1000]);
    assert_eq!((c.bytes_reserved(), pool.in_use()), (1000, 1000));
    let _ = c.feed(b"y");
    assert_eq!(
        (c.bytes_retained(), c.bytes_reserved()),
        (1000, 1000 + CUT_MARGIN as u64)
    );
    let head_and_tail = CaptureSettings {
        retain: Retain::HeadAndTail,
        head_bytes: 200,
        ..settings
    };
    let mut c = StreamCapture::new(head_and_tail, &pool);
    let _ = c.feed(&[b'x'; 5000]);
    assert_eq!(
        (c.bytes_retained(), c.bytes_reserved()),
        (1000, 1000 + 2 * CUT_MARGIN as u64)
    );
    let retained = c.finish();
    drop(retained);
    c = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 10), &pool);
    // A pool that refuses the margin: the capture keeps none and cuts at
    // the window's edge.
    let small = RetentionPool::new(10);
    let mut limited = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 10), &small);
    let _ = limited.feed(format!("xx ghp_{TOKEN_BODY}\n").as_bytes());
    assert_eq!(limited.bytes_reserved(), 10);
    assert_eq!(
        limited.render(),
        "[stderr truncated: kept last 10 of 44 bytes]\n[cut]\n"
    );
    let _ = c.feed(b"0123456789abc");
    assert_eq!(c.bytes_reserved(), 10 + CUT_MARGIN as u64);
}

#[test]
fn both_inner_edges_of_head_and_tail_read_their_margins() {
    let token = format!("ghp_{TOKEN_BODY}");
    let input = format!("{} {token} {} {token} end\n", prose(300), prose(3000));
    // The head ends 10 bytes into the first token, the tail starts 10
    // bytes into the second: both halves are redacted by the rule.
    let head = 300 + 1 + 10;
    let tail = token.len() - 10 + " end\n".len();
    let (text, counts) = render(Retain::HeadAndTail, head + tail, head, input.as_bytes());
    assert_eq!(
        text,
        format!(
            "{} [redacted: github-token]\n[stderr truncated: kept first {head} and last {tail} of {} bytes, {} omitted between them]\n[redacted: github-token] end\n",
            prose(300),
            input.len(),
            input.len() - head - tail
        )
    );
    assert_eq!((counts.rule("github-token"), counts.cut_words()), (2, 0));
}

#[test]
fn a_shrunk_budget_keeps_the_dropped_bytes_next_to_the_window_as_its_margin() {
    let input = format!("{}db: password=Xk29fQ7mZpL4 connecting\n", prose(2000));
    let pool = RetentionPool::unlimited();
    let mut c = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 4096), &pool);
    let _ = c.feed(input.as_bytes());
    assert!(!c.truncated());
    // The shrink drops all but the value's end: `password=` is in the
    // margin.
    c.shrink_budget(20);
    let (text, counts) = c.window().render_with_redactions();
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last 20 of {} bytes]\n[redacted: password-assignment] connecting\n",
            input.len()
        )
    );
    assert_eq!(
        (counts.rule("password-assignment"), counts.cut_words()),
        (1, 0)
    );
    assert_eq!(pool.in_use(), 20 + CUT_MARGIN as u64);
}

/// A token glued to the word before it (no boundary, so no rule finds
/// it) and cut by a window's edge: from its prefix on, the edge hides it,
/// whatever its length; the word before it and the text past it show.
#[test]
fn a_glued_token_cut_by_an_edge_is_hidden_from_its_prefix() {
    let body: String = TOKEN_BODY.repeat(5);
    let token = format!("sk_live_{body}");
    let glue = "h".repeat(300);
    let before = prose(1000);
    let input = format!("{before}{glue}{token}\n{}", "y".repeat(3000));
    let token_at = before.len() + glue.len();
    // A head window that ends 90 bytes into the token.
    let head = token_at + 90;
    let (text, counts) = render(Retain::Head, head, 0, input.as_bytes());
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept first {head} of {} bytes]\n{before}{glue}[cut]",
            input.len()
        )
    );
    assert_eq!((counts.total(), counts.cut_words()), (0, 1));

    // A tail window that starts 90 bytes into it: its end is hidden, the
    // line after it shows.
    let after = format!("\nthe deploy goes on {}\n", prose(200));
    let input = format!("{before}{glue}{token}{after}");
    let budget = input.len() - token_at - 90;
    let (text, counts) = render(Retain::Tail, budget, 0, input.as_bytes());
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept last {budget} of {} bytes]\n[cut]{after}",
            input.len()
        )
    );
    assert_eq!(counts.cut_words(), 1);
    assert!(!text.contains(&body[body.len() - 20..]));
}

/// The same with a four-byte prefix: a GitHub token glued to the word
/// before it and cut by a head window shows none of its characters.
#[test]
fn a_glued_github_token_cut_by_a_head_window_is_hidden() {
    let token = format!("ghp_{TOKEN_BODY}");
    let glue = "h".repeat(300);
    let before = prose(1000);
    let input = format!("{before}{glue}{token}\n{}", "y".repeat(3000));
    let head = before.len() + glue.len() + 18;
    let (text, counts) = render(Retain::Head, head, 0, input.as_bytes());
    assert_eq!(
        text,
        format!(
            "[stderr truncated: kept first {head} of {} bytes]\n{before}{glue}[cut]",
            input.len()
        )
    );
    assert_eq!((counts.total(), counts.cut_words()), (0, 1));
}
