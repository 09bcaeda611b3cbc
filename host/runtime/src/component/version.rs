//! Which versions of the contract this host runs, and what a refused tenant is told.
//!
//! The rule: a host implementing `ruststream:handler@X.Y` runs components built against any
//! `X.y` with `y <= Y`, for the whole `X` line: a minor version only adds to the contract, so
//! what was built against an older minor still means the same. A component built against
//! another major (`0.x` before 1.0, whose calls have other shapes), or against a newer minor
//! (it may call or export what this host does not know), is refused at load, naming both
//! versions and what to do. Patch versions never change the contract and are not compared.

use std::fmt;

use super::bindings::contract_version;
use ruststream_common::escape::quote;

/// The WIT package this host implements.
pub const CONTRACT: &str = concat!("ruststream:handler@", contract_version!());

/// The start of every interface name of the contract.
pub(crate) const CONTRACT_PREFIX: &str = "ruststream:handler/";

/// A version of the contract's WIT package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ContractVersion {
    /// Changes when a component built against the previous one no longer runs.
    pub major: u64,
    /// Changes when the contract gains something (an interface, a function, a case).
    pub minor: u64,
    /// Changes for documentation only.
    pub patch: u64,
}

impl ContractVersion {
    /// The version this host implements: [`CONTRACT`]'s.
    pub const HOST: Self = Self {
        major: 1,
        minor: 0,
        patch: 0,
    };

    /// Reads `major.minor.patch`; `None` for anything else (a pre-release included).
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.').map(|part| part.parse::<u64>().ok());
        let version = Self {
            major: parts.next()??,
            minor: parts.next()??,
            patch: parts.next()??,
        };
        parts.next().is_none().then_some(version)
    }

    /// Whether a host of this version runs a component built against `built`: the same major,
    /// a minor no newer than this one.
    pub fn runs(self, built: Self) -> bool {
        built.major == self.major && built.minor <= self.minor
    }
}

impl fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Why a component's contract version is refused. Each names the interface it was found on
/// (quoted), the version this host implements and the range it runs, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionRefusal {
    /// Built against an older major version of the contract (0.x, before 1.0).
    #[error(
        "built against `{found}`, an older contract than this host runs: it implements \
         {CONTRACT} and runs components built against {range}; rebuild the component with a \
         RustStream guest SDK for contract {major}.x, or with bindings of wit/ruststream.wit \
         {major}.x",
        range = accepted_range(),
        major = ContractVersion::HOST.major
    )]
    TooOld {
        /// The interface and version found, as the component names it.
        found: String,
    },
    /// Built against a newer minor or major version than this host implements.
    #[error(
        "built against `{found}`, newer than this host: it implements {CONTRACT} and runs \
         components built against {range}; upgrade the host to one implementing {built}.{minor} \
         or later, or rebuild the component against {CONTRACT}",
        range = accepted_range(),
        built = version.major,
        minor = version.minor
    )]
    TooNew {
        /// The interface and version found, as the component names it.
        found: String,
        /// Its version.
        version: ContractVersion,
    },
    /// A contract interface without a version this host can read.
    #[error(
        "names `{found}`, without a contract version this host can read: it implements \
         {CONTRACT}; build the component with the RustStream guest SDK, or with bindings of \
         wit/ruststream.wit"
    )]
    Unreadable {
        /// The interface, as the component names it.
        found: String,
    },
}

/// The versions this host runs, as the refusals say it: `ruststream:handler 1.0 to 1.0`.
fn accepted_range() -> String {
    let host = ContractVersion::HOST;
    format!(
        "ruststream:handler {}.0 to {}.{}",
        host.major, host.major, host.minor
    )
}

/// Checks the version of `name`, an import or export of the contract
/// (`ruststream:handler/handler@1.0.0`), against [`ContractVersion::HOST`].
///
/// # Errors
/// When the host does not run that version, or the name carries none.
pub(crate) fn check(name: &str) -> Result<ContractVersion, VersionRefusal> {
    let found = quote(name);
    let Some(version) = name
        .rsplit_once('@')
        .and_then(|(_, version)| ContractVersion::parse(version))
    else {
        return Err(VersionRefusal::Unreadable { found });
    };
    let host = ContractVersion::HOST;
    if host.runs(version) {
        Ok(version)
    } else if version < host {
        Err(VersionRefusal::TooOld { found })
    } else {
        Err(VersionRefusal::TooNew { found, version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_version_is_the_bindings_version() {
        assert_eq!(
            ContractVersion::parse(contract_version!()),
            Some(ContractVersion::HOST)
        );
    }

    #[test]
    fn a_host_runs_its_own_major_up_to_its_own_minor() {
        let v = |major, minor, patch| ContractVersion {
            major,
            minor,
            patch,
        };
        let host = v(1, 3, 0);
        for runs in [v(1, 0, 0), v(1, 2, 7), v(1, 3, 0), v(1, 3, 2)] {
            assert!(host.runs(runs), "{runs}");
        }
        for refused in [v(0, 5, 0), v(0, 9, 9), v(1, 4, 0), v(2, 0, 0)] {
            assert!(!host.runs(refused), "{refused}");
        }
    }

    #[test]
    fn refusals_name_both_versions_and_what_to_do() {
        let old = check("ruststream:handler/handler@0.5.0").expect_err("0.x refused");
        assert!(matches!(old, VersionRefusal::TooOld { .. }));
        let text = old.to_string();
        assert!(
            text.contains("`ruststream:handler/handler@0.5.0`"),
            "{text}"
        );
        assert!(text.contains(CONTRACT), "{text}");
        assert!(
            text.contains("rebuild the component with a RustStream guest SDK for contract 1.x")
        );
        let new = check("ruststream:handler/handler@1.1.0").expect_err("newer minor refused");
        let text = new.to_string();
        assert!(
            text.contains("`ruststream:handler/handler@1.1.0`"),
            "{text}"
        );
        assert!(
            text.contains("upgrade the host to one implementing 1.1"),
            "{text}"
        );
        assert!(check("ruststream:handler/batch@2.0.0").is_err());
        assert_eq!(
            check("ruststream:handler/handler@1.0.0"),
            Ok(ContractVersion::HOST)
        );
        assert!(matches!(
            check("ruststream:handler/handler"),
            Err(VersionRefusal::Unreadable { .. })
        ));
        assert!(check("ruststream:handler/handler@1.0.0-rc1").is_err());
    }
}
