//! `ruststream new`: writes a tenant crate, ready to build into a component and to test with
//! `ruststream test`.
//!
//! The crate depends on the guest SDK (`ruststream`), from a RustStream checkout or from git,
//! and on nothing else for its tests: it holds the seed's settlement handler, a records file
//! and an expectations file, and a test that builds the component and runs `ruststream test`
//! (the binary: `$RUSTSTREAM_BIN` or on the PATH) on them, so `cargo test` never compiles the
//! runtime. Its manifest shows, commented out, the runtime dependency (`ruststream-runtime`
//! with `testing`) that in-process `TestApp` tests would take instead.

use std::path::{Path, PathBuf};

use ruststream_common::escape::escape_controls;

/// Why a tenant crate was not written: the name, or the directory or file, at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NewError {
    /// The name is not one cargo takes for a crate (or that can name its component).
    #[error(
        "`{}` is not a valid tenant crate name: use 1-64 characters of [A-Za-z0-9_-], \
         starting with a letter",
        escape_controls(.name)
    )]
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// The directory holds files already.
    #[error("{} already exists and is not empty", dir.display())]
    Occupied {
        /// The directory.
        dir: PathBuf,
    },
    /// A directory of the crate cannot be made.
    #[error("creating {}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file of the crate cannot be written.
    #[error("writing {}", file.display())]
    Write {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Where the tenant crate takes RustStream's crates from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A checkout of this repository.
    Checkout(PathBuf),
    /// A git repository holding this workspace.
    Git(String),
}

impl Source {
    /// The checkout the binary was built from, when it is still there.
    pub fn built_from() -> Option<Self> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = root.canonicalize().ok()?;
        root.join("guest-sdk/Cargo.toml")
            .exists()
            .then_some(Self::Checkout(root))
    }

    /// The dependency line of crate `name`, at `dir` inside a checkout, with `extra` keys.
    fn dependency(&self, name: &str, dir: &str, extra: &str) -> String {
        match self {
            Self::Checkout(root) => {
                let path = toml_string(&root.join(dir).display().to_string());
                format!("{name} = {{ path = {path}{extra} }}")
            }
            Self::Git(url) => format!("{name} = {{ git = {}{extra} }}", toml_string(url)),
        }
    }
}

/// Writes a tenant crate called `name` into `dir`, which must not exist or be empty.
///
/// # Errors
/// When `name` is not a valid crate name, `dir` holds files, or a file cannot be written; see
/// [`NewError`].
pub fn write_tenant_crate(name: &str, dir: &Path, source: &Source) -> Result<(), NewError> {
    check_name(name)?;
    let occupied = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied {
        return Err(NewError::Occupied {
            dir: dir.to_owned(),
        });
    }
    let file = name.replace('-', "_");
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{file}}", &file)
            .replace("{{sdk}}", &source.dependency("ruststream", "guest-sdk", ""))
            .replace(
                "{{runtime}}",
                &source.dependency(
                    "ruststream-runtime",
                    "host/runtime",
                    ", features = [\"testing\"]",
                ),
            )
    };
    let files = [
        (
            "Cargo.toml",
            include_str!("../templates/tenant/Cargo.toml.in"),
        ),
        (
            ".cargo/config.toml",
            include_str!("../templates/tenant/config.toml.in"),
        ),
        ("src/lib.rs", include_str!("../templates/tenant/lib.rs.in")),
        (
            "tests/handler.rs",
            include_str!("../templates/tenant/test.rs.in"),
        ),
        (
            "tests/records.jsonl",
            include_str!("../templates/tenant/records.jsonl.in"),
        ),
        (
            "tests/expect.toml",
            include_str!("../templates/tenant/expect.toml.in"),
        ),
        (
            ".gitignore",
            include_str!("../templates/tenant/gitignore.in"),
        ),
    ];
    for (path, template) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| NewError::CreateDir {
                dir: parent.to_owned(),
                source,
            })?;
        }
        std::fs::write(&path, fill(template))
            .map_err(|source| NewError::Write { file: path, source })?;
    }
    Ok(())
}

/// A crate name cargo accepts, which also names the component file and its lease tables.
fn check_name(name: &str) -> Result<(), NewError> {
    let valid = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid {
        return Err(NewError::InvalidName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_crate_names() {
        assert!(check_name("ledger-book").is_ok());
        assert!(check_name("book_2").is_ok());
        for bad in ["", "2fast", "has space", "dot.ted", "x\u{1b}[2J"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_invalid_name_is_refused_by_name_before_anything_is_written() {
        let dir = std::env::temp_dir().join(format!("ruststream-new-bad-{}", std::process::id()));
        let source = Source::Checkout(PathBuf::from("/src/ruststream"));
        let error = write_tenant_crate("x\u{1b}[2J", &dir, &source);
        assert!(
            matches!(&error, Err(NewError::InvalidName { name }) if name == "x\u{1b}[2J"),
            "{error:?}"
        );
        let shown = error.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(shown.starts_with("`x\\u{1b}[2J` is not a valid"), "{shown}");
        assert!(!dir.exists(), "nothing is written");
    }

    #[test]
    fn dependencies_quote_their_paths() {
        let source = Source::Checkout(PathBuf::from("/src/rust \"stream\""));
        assert_eq!(
            source.dependency("ruststream", "guest-sdk", ""),
            r#"ruststream = { path = "/src/rust \"stream\"/guest-sdk" }"#
        );
        let git = Source::Git("https://example.com/ruststream.git".into());
        assert_eq!(
            git.dependency(
                "ruststream-runtime",
                "host/runtime",
                ", features = [\"testing\"]"
            ),
            r#"ruststream-runtime = { git = "https://example.com/ruststream.git", features = ["testing"] }"#
        );
    }

    #[test]
    fn a_crate_is_written_once() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("ruststream-new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let source = Source::Checkout(PathBuf::from("/src/ruststream"));
        write_tenant_crate("ledger-book", &dir, &source)?;
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))?;
        assert!(manifest.contains("name = \"ledger-book\""), "{manifest}");
        assert!(manifest.contains(r#"ruststream = { path = "/src/ruststream/guest-sdk" }"#));
        assert!(
            !manifest.contains("\nruststream-runtime"),
            "the runtime is no dependency: {manifest}"
        );
        let test = std::fs::read_to_string(dir.join("tests/handler.rs"))?;
        assert!(test.contains("release/ledger_book.wasm"), "{test}");
        assert!(test.contains("RUSTSTREAM_BIN"), "{test}");
        assert!(dir.join("tests/records.jsonl").is_file());
        assert!(dir.join("tests/expect.toml").is_file());
        let again = write_tenant_crate("ledger-book", &dir, &source);
        assert!(
            matches!(&again, Err(NewError::Occupied { dir: named }) if *named == dir),
            "a second write over the crate is refused: {again:?}"
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
