//! `ruststream token`: a token just made, and the list of tenant tokens.

use ruststream_fleet::admin::model::{TokenList, TokenMade};

use super::text::{age, line, text};

/// `token create`: the token, shown this once, and what it reaches.
pub(crate) fn render_token_made(made: &TokenMade) -> String {
    let mut out = String::new();
    line(
        &mut out,
        0,
        format_args!(
            "token {} for tenant {}{}: shown this once, keep it now",
            text(&made.id),
            text(&made.tenant),
            if made.name.is_empty() {
                String::new()
            } else {
                format!(" ({})", text(&made.name))
            }
        ),
    );
    line(&mut out, 0, format_args!("{}", text(&made.token)));
    line(
        &mut out,
        0,
        format_args!("kept hashed in the {}", text(&made.store)),
    );
    out
}

/// `token list`: one line per tenant token.
pub(crate) fn render_tokens(list: &TokenList, now_ms: u64) -> String {
    let mut out = String::new();
    line(
        &mut out,
        0,
        format_args!(
            "{} tenant token(s), in the {}",
            list.tokens.len(),
            text(&list.store)
        ),
    );
    for token in &list.tokens {
        line(
            &mut out,
            1,
            format_args!(
                "{} {} {} made {} ago by {}",
                text(&token.id),
                text(&token.tenant),
                if token.name.is_empty() {
                    "-".into()
                } else {
                    text(&token.name)
                },
                age(now_ms, token.created_ms),
                text(&token.created_by)
            ),
        );
    }
    out
}
