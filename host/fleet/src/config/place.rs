//! Where a value is in the tenants file, and what a mistake there says: the key path, its line,
//! and the place a component file is named.

use std::path::Path;

use ruststream_common::escape::escape_controls;

/// Where in the file a value is: keys and array indices from the top.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPath(pub(super) Vec<Step>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

impl KeyPath {
    pub(super) fn root() -> Self {
        Self::default()
    }

    pub(super) fn key(mut self, key: &str) -> Self {
        self.0.push(Step::Key(key.to_owned()));
        self
    }

    /// The key beside this one (in the same table) named `key`.
    pub(super) fn sibling(&self, key: &str) -> Self {
        let mut path = self.clone();
        path.0.pop();
        path.key(key)
    }

    pub(super) fn index(mut self, index: usize) -> Self {
        self.0.push(Step::Index(index));
        self
    }

    /// The 1-based line of the value at this path in `text`, parsed into `root`, if the path
    /// is there. A file naming a thousand components is parsed once for their thousand lines.
    pub(super) fn line_at(&self, root: &toml::de::DeValue<'_>, text: &str) -> Option<usize> {
        let (mut value, mut start) = (root, 0);
        for step in &self.0 {
            let found = match step {
                Step::Key(key) => value.get(key.as_str())?,
                Step::Index(index) => value.get(*index)?,
            };
            (value, start) = (found.get_ref(), found.span().start);
        }
        Some(text.get(..start)?.matches('\n').count() + 1)
    }
}

/// `text` parsed for the places of its keys, if it parses.
pub(super) fn document(text: &str) -> Option<toml::de::DeValue<'_>> {
    let document = toml::de::DeTable::parse(text).ok()?;
    Some(toml::de::DeValue::Table(document.into_inner()))
}

impl std::fmt::Display for KeyPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Key(key) if i == 0 => f.write_str(key)?,
                Step::Key(key) => write!(f, ".{key}")?,
                Step::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// A value that parses but cannot be used: where it is and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mistake {
    pub key: KeyPath,
    pub message: String,
}

impl Mistake {
    pub(super) fn new(key: KeyPath, message: impl Into<String>) -> Self {
        Self {
            key,
            message: message.into(),
        }
    }

    /// The mistake as one line naming `file`, the line (when the key is found in `text`) and
    /// the key.
    pub(super) fn in_file(&self, file: &Path, text: &str) -> String {
        format!("{}: {}", self.place_in(file, text), self.message)
    }

    /// Where the mistake is: `file`, the line (when the key is found in `text`) and the key.
    pub(super) fn place_in(&self, file: &Path, text: &str) -> String {
        self.place_at(file, text, document(text).as_ref())
    }

    /// As [`place_in`](Self::place_in), with `text` already parsed into `root`.
    pub(super) fn place_at(
        &self,
        file: &Path,
        text: &str,
        root: Option<&toml::de::DeValue<'_>>,
    ) -> String {
        let file = file.display();
        let line = root.and_then(|root| self.key.line_at(root, text));
        match (self.key.0.is_empty(), line) {
            (true, _) => format!("config file {file}"),
            (false, Some(line)) => format!("config file {file}, line {line}, `{}`", self.key),
            (false, None) => format!("config file {file}, `{}`", self.key),
        }
    }
}

/// Where a component file is named in the tenants file, and how it is written there: what a
/// message about the file shows, rather than the path it resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentSource {
    /// The path as the tenants file writes it.
    pub written: String,
    /// The file, line and key: ``config file F, line 3, `tenants[0].components[1]` ``.
    pub place: String,
}

impl std::fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} = \"{}\"", self.place, escape_controls(&self.written))
    }
}

impl ComponentSource {
    /// What names the component in a line about it:
    /// ``tenant `T`, config file F, line 3, `tenants[0].components[1]` = "acme/ledger.wasm"``.
    /// `check --config` and `run` (its log,
    /// its `partial start` line, readiness, and the error it ends with when nothing starts)
    /// name a component of a tenants file with these words, followed by `: ` and the reason.
    pub fn named(&self, tenant: &str) -> String {
        format!("tenant `{tenant}`, {self}")
    }

    /// The path as the tenants file writes it, as a refusal shows it.
    pub fn shown_path(&self) -> String {
        escape_controls(&self.written).into_owned()
    }
}
