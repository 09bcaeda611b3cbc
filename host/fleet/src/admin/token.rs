//! The admin API's bearer token: made by the host at its first start (32 bytes from the OS's
//! random source, as 64 hex digits) in a file only its user may read, and read back by the
//! host and by the CLI's verbs from the same file; or given to every host of a fleet alike, by
//! that file or by the environment ([`TOKEN_ENV`]).

use std::fmt::Write as _;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq as _;

use crate::state::{create_atomic, create_private_dir};

/// Random bytes in a token the host makes.
const TOKEN_BYTES: usize = 32;
/// Fewest characters a token may have (one an operator gives, too).
const MIN_TOKEN_CHARS: usize = 32;

/// The environment variable that gives the token itself, for every host of a fleet and the
/// verbs alike (a Kubernetes Secret as an env value): no file is read or made then.
pub const TOKEN_ENV: &str = "RUSTSTREAM_ADMIN_TOKEN";

/// Why there is no usable token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// No token file there.
    #[error(
        "no admin token at {}: a host makes it at its first start; point at the host's with \
         --admin-token-file, or at its state directory with --state-dir",
        path.display()
    )]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The file cannot be read or written.
    #[error("cannot {action} the admin token file {}", path.display())]
    Io {
        /// `read` or `create`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The OS gave no random bytes.
    #[error("cannot make an admin token: the OS gave no random bytes ({0})")]
    Random(getrandom::Error),
    /// Others than its owner may read or write the file.
    #[error(
        "the admin token file {} may be read or written by others (mode {mode:04o}): \
         `chmod 600` it",
        path.display()
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file holds no usable token.
    #[error("the admin token file {} {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The environment variable holds no usable token.
    #[error("the admin token in ${variable} {reason}")]
    InvalidValue {
        /// The variable.
        variable: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A bearer token. Never shown: its `Debug` says only that it is one.
#[derive(Clone)]
pub struct AdminToken(String);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

impl AdminToken {
    /// The host's token: the one in `path`, or a new one written there (mode 0600, its
    /// directory made 0700 if missing) when there is none. Returns whether it was made now.
    ///
    /// # Errors
    /// When the file cannot be read or made, when others may read or write it, or when it
    /// holds no token of at least 32 visible ASCII characters.
    pub fn load_or_create(path: &Path) -> Result<(Self, bool), TokenError> {
        let created = match std::fs::metadata(path) {
            Ok(_) => false,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let mut bytes = [0_u8; TOKEN_BYTES];
                getrandom::fill(&mut bytes).map_err(TokenError::Random)?;
                let token = bytes.iter().fold(String::new(), |mut hex, byte| {
                    // Writing to a String cannot fail.
                    let _ = write!(hex, "{byte:02x}");
                    hex
                });
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    create_private_dir(dir).map_err(|error| TokenError::Io {
                        action: "create",
                        path: path.to_owned(),
                        source: io::Error::other(error),
                    })?;
                }
                // Another host making one at the same moment wins as well: both read it back.
                create_atomic(path, format!("{token}\n").as_bytes(), 0o600).map_err(|source| {
                    TokenError::Io {
                        action: "create",
                        path: path.to_owned(),
                        source,
                    }
                })?
            }
            Err(source) => {
                return Err(TokenError::Io {
                    action: "read",
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let mode = std::fs::metadata(path)
            .map_err(|source| TokenError::Io {
                action: "read",
                path: path.to_owned(),
                source,
            })?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(TokenError::Exposed {
                path: path.to_owned(),
                mode: mode & 0o7777,
            });
        }
        Ok((Self::read(path)?, created))
    }

    /// The token in `path` (surrounding white space ignored), as the CLI's verbs read it.
    ///
    /// # Errors
    /// [`TokenError::Missing`] when there is no such file; otherwise when it cannot be read or
    /// holds no token of at least 32 visible ASCII characters.
    pub fn read(path: &Path) -> Result<Self, TokenError> {
        let bytes = std::fs::read(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => TokenError::Missing {
                path: path.to_owned(),
            },
            _ => TokenError::Io {
                action: "read",
                path: path.to_owned(),
                source,
            },
        })?;
        let invalid = |reason| TokenError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let text = std::str::from_utf8(&bytes).map_err(|_| invalid("is not text"))?;
        Self::parse(text).map_err(invalid)
    }

    /// The token [`TOKEN_ENV`] gives, if it is set.
    ///
    /// # Errors
    /// When it is set but not to a token of at least 32 visible ASCII characters (surrounding
    /// white space ignored).
    pub fn from_env() -> Result<Option<Self>, TokenError> {
        let Some(value) = std::env::var_os(TOKEN_ENV) else {
            return Ok(None);
        };
        let invalid = |reason| TokenError::InvalidValue {
            variable: TOKEN_ENV,
            reason,
        };
        let text = value.to_str().ok_or_else(|| invalid("is not text"))?;
        Self::parse(text).map(Some).map_err(invalid)
    }

    /// A token from its text, surrounding white space ignored; else what is wrong with it.
    fn parse(text: &str) -> Result<Self, &'static str> {
        let token = text.trim();
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("holds more than one word, or characters other than visible ASCII");
        }
        if token.len() < MIN_TOKEN_CHARS {
            return Err("holds a token shorter than 32 characters");
        }
        Ok(Self(token.to_owned()))
    }

    /// A token with this text, for tests that need no file.
    #[cfg(any(test, feature = "fake"))]
    pub(crate) fn for_tests(text: &str) -> Self {
        Self(text.to_owned())
    }

    /// The token, for an `Authorization` header.
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, compared in constant time (only the length can
    /// show through the timing, and every token the host makes has the same length).
    pub fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(presented).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ruststream-token-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn made_once_private_and_reused() {
        let dir = scratch("made");
        let path = dir.join("state").join("admin-token");
        let (token, created) = AdminToken::load_or_create(&path).expect("made");
        assert!(created);
        assert_eq!(token.secret().len(), 64);
        let mode = std::fs::metadata(&path)
            .expect("there")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, created) = AdminToken::load_or_create(&path).expect("read back");
        assert!(!created);
        assert_eq!(again.secret(), token.secret());
        assert_eq!(format!("{token:?}"), "AdminToken(..)");
        let other = AdminToken::load_or_create(&dir.join("other")).expect("made");
        assert_ne!(other.0.secret(), token.secret(), "random");
    }

    #[test]
    fn compared_whole() {
        let token = AdminToken("a".repeat(40));
        assert!(token.matches("a".repeat(40).as_bytes()));
        assert!(!token.matches("a".repeat(39).as_bytes()));
        assert!(!token.matches(format!("{}b", "a".repeat(39)).as_bytes()));
        assert!(!token.matches(b""));
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let dir = scratch("bad");
        std::fs::create_dir_all(&dir).expect("made");
        let exposed = dir.join("exposed");
        std::fs::write(&exposed, "b".repeat(40)).expect("written");
        std::fs::set_permissions(&exposed, std::fs::Permissions::from_mode(0o644)).expect("");
        let error = AdminToken::load_or_create(&exposed).expect_err("others may read it");
        assert!(error.to_string().contains("mode 0644"), "{error}");
        // The verbs read it all the same: they are not the ones to guard it.
        assert!(AdminToken::read(&exposed).is_ok());

        for (content, needle) in [
            ("short\n", "shorter than 32"),
            (
                "two words two words two words two words",
                "more than one word",
            ),
        ] {
            let path = dir.join("bad");
            std::fs::write(&path, content).expect("written");
            let error = AdminToken::read(&path).expect_err(content).to_string();
            assert!(error.contains(needle), "{error}");
        }
        let error = AdminToken::read(&dir.join("none")).expect_err("missing");
        assert!(matches!(error, TokenError::Missing { .. }), "{error}");
        assert!(error.to_string().contains("--admin-token-file"), "{error}");
    }
}
