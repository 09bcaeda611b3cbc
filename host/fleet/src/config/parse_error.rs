//! What a tenants file that does not parse into its shape says, on one line: the file, line and
//! column, the key whose value is at fault when it can be found, and the whole reason (serde's
//! own: the unknown key or value with the accepted ones, the type expected), with the accepted
//! name closest to a misspelt one.

use std::path::Path;

use super::place::{KeyPath, Step};

/// `error`, which parsing `text` (the file at `file`) came to, as one line.
pub(crate) fn describe(file: &Path, text: &str, error: &toml::de::Error) -> String {
    let mut line = format!("config file {}", file.display());
    if let Some(span) = error.span() {
        let (row, column) = position(text, span.start);
        line.push_str(&format!(", line {row}, column {column}"));
        let key = KeyPath::at_offset(text, span.start);
        if !key.0.is_empty() {
            line.push_str(&format!(", `{key}`"));
        }
    }
    let reason = error.message().trim().replace('\n', " ");
    line.push_str(&format!(": {reason}"));
    if let Some(suggestion) = did_you_mean(&reason) {
        line.push_str(&format!("; did you mean `{suggestion}`?"));
    }
    line
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let row = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    (row, before[line_start..].chars().count() + 1)
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" (or variant), the accepted name
/// closest to `x`, when it is close enough to be what was meant.
fn did_you_mean(reason: &str) -> Option<&str> {
    let rest = reason
        .strip_prefix("unknown field ")
        .or_else(|| reason.strip_prefix("unknown variant "))?;
    let mut quoted = rest.split('`').skip(1).step_by(2);
    let given = quoted.next()?;
    // Case does not count, but among equals the one spelt in the same case wins
    // (`trim_horizon` over its alias `TRIM_HORIZON` for `trim-horizon`).
    let ((distance, _), closest) = quoted
        .map(|accepted| {
            let loose = edit_distance(&given.to_lowercase(), &accepted.to_lowercase());
            ((loose, edit_distance(given, accepted)), accepted)
        })
        .min_by_key(|(distances, _)| *distances)?;
    (distance <= (given.chars().count() / 3).max(2)).then_some(closest)
}

/// Levenshtein distance between `a` and `b`, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

impl KeyPath {
    /// The path of the innermost key whose name or value covers byte `offset` of `text`;
    /// empty when the file does not parse as TOML at all or the offset is outside every key.
    pub(super) fn at_offset(text: &str, offset: usize) -> Self {
        let mut path = Vec::new();
        if let Ok(document) = toml::de::DeTable::parse(text) {
            search_table(document.get_ref(), offset, &mut path);
        }
        KeyPath(path)
    }
}

/// Pushes onto `path` the steps to what covers `offset` in `table`; whether anything does.
fn search_table(table: &toml::de::DeTable<'_>, offset: usize, path: &mut Vec<Step>) -> bool {
    for (key, value) in table.iter() {
        path.push(Step::Key(key.get_ref().to_string()));
        if key.span().contains(&offset) || search(value, offset, path) {
            return true;
        }
        path.pop();
    }
    false
}

/// [`search_table`] for any value. Children are searched before the value's own span: a
/// table or an array of tables spans only its `[header]`, not its entries.
fn search(
    value: &toml::Spanned<toml::de::DeValue<'_>>,
    offset: usize,
    path: &mut Vec<Step>,
) -> bool {
    let inside = match value.get_ref() {
        toml::de::DeValue::Table(table) => search_table(table, offset, path),
        toml::de::DeValue::Array(items) => items.iter().enumerate().any(|(index, item)| {
            path.push(Step::Index(index));
            let found = search(item, offset, path);
            if !found {
                path.pop();
            }
            found
        }),
        _ => false,
    };
    inside || value.span().contains(&offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(text: &str) -> String {
        let error = toml::from_str::<super::super::Config>(text).expect_err("refused");
        describe(Path::new("tenants.toml"), text, &error)
    }

    const TENANT: &str = "[[tenants]]\nname = \"acme\"\ncomponents = [\"a.wasm\"]\n";

    #[test]
    fn an_unknown_key_names_the_accepted_ones_and_the_closest() {
        let line = described(&format!("{TENANT}subscibe = [\"ledger\"]\n"));
        assert!(
            line.starts_with("config file tenants.toml, line 4, column 1, `tenants[0].subscibe`: unknown field `subscibe`, expected one of `name`"),
            "{line}"
        );
        assert!(line.ends_with("; did you mean `subscribe`?"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn a_wrong_type_says_what_was_expected() {
        let line = described(&format!("{TENANT}subscribe = \"ledger\"\n"));
        assert!(
            line.contains("line 4, column 13, `tenants[0].subscribe`"),
            "{line}"
        );
        assert!(
            line.contains("invalid type: string \"ledger\", expected a sequence"),
            "{line}"
        );
    }

    #[test]
    fn an_unknown_value_names_the_accepted_ones() {
        let line = described(&format!("{TENANT}starting_position = \"trim-horizon\"\n"));
        assert!(
            line.contains("`tenants[0].starting_position`: unknown variant `trim-horizon`, expected one of `TRIM_HORIZON`, `trim_horizon`, `LATEST`, `latest`"),
            "{line}"
        );
        assert!(line.ends_with("did you mean `trim_horizon`?"), "{line}");
    }

    #[test]
    fn lambda_s_own_spellings_of_its_positions_are_accepted() {
        for (spelling, expected) in [
            (
                "TRIM_HORIZON",
                super::super::tenant::StartingPosition::TrimHorizon,
            ),
            ("LATEST", super::super::tenant::StartingPosition::Latest),
            (
                "trim_horizon",
                super::super::tenant::StartingPosition::TrimHorizon,
            ),
        ] {
            let text = format!("{TENANT}subscribe = [\"l\"]\nstarting_position = \"{spelling}\"\n");
            let config: super::super::Config = toml::from_str(&text).expect("accepted");
            assert_eq!(config.tenants[0].starting_position, Some(expected));
        }
    }

    #[test]
    fn nothing_is_suggested_for_a_name_far_from_every_accepted_one() {
        assert_eq!(
            did_you_mean("unknown field `zzzzzzzz`, expected `name` or `age`"),
            None
        );
        assert_eq!(
            did_you_mean("unknown field `nme`, expected `name` or `age`"),
            Some("name")
        );
    }

    #[test]
    fn positions_count_characters_from_one() {
        assert_eq!(position("ab\ncdé\nx", 8), (3, 1));
        assert_eq!(position("ab\ncdé", 5), (2, 3));
    }
}
