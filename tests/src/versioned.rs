//! The log of the `versioned` test guests (`tests/guests/versioned`): each `handle` logs the
//! record it handled with the version that handled it, which is how the swap and fleet deploy
//! tests tell, per record, which version met it.

/// One `handled` line of the `versioned` app: which version handled which record where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    /// The record's `id`.
    pub n: u64,
    /// The version's number (`1` for `versioned-v1`).
    pub version: String,
    /// The shard it was read from.
    pub shard: String,
    /// Its sequence number.
    pub sequence: String,
}

/// The `handled` lines of a host log, in log order.
pub fn handled(log: &str) -> Vec<Handled> {
    log.lines()
        .filter(|line| line.contains(" handled "))
        .filter_map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .map(|token| token.strip_prefix("fields=").unwrap_or(token))
                    .find_map(|token| token.strip_prefix(&format!("{name}=")))
                    .map(|value| value.trim_matches('"').to_owned())
            };
            Some(Handled {
                n: field("event.id")?.parse().ok()?,
                version: field("version")?,
                shard: field("shard")?,
                sequence: field("sequence")?,
            })
        })
        .collect()
}
