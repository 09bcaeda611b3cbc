//! The one way a duration is written, in the tenants file, in flags and in their environment
//! variables alike: a whole number and a unit (`"500ms"`, `"30s"`, `"5m"`, `"1h"`, `"7d"`).
//! Whether zero means anything is the setting's to say, not the type's.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ruststream_common::escape::quote;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A duration as a setting: read from `"30s"` (a whole number, then `ms`, `s`, `m`, `h` or
/// `d`, nothing between them), shown back in the largest unit that writes it exactly. Files and flags read it the same way, so `lease_ttl = "20s"` and `--lease-ttl 20s`
/// are one setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DurationSetting(Duration);

/// Why a text is not a [`DurationSetting`]: not a whole number and a known unit. The text is
/// shown with control characters escaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}` is not a duration: write e.g. \"500ms\", \"30s\", \"5m\", \"1h\" or \"7d\"", quote(.0))]
pub struct DurationError(String);

/// The units, largest first, with their length in ms.
const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

impl DurationSetting {
    /// `ms` milliseconds, as a setting.
    pub const fn from_millis(ms: u64) -> Self {
        Self(Duration::from_millis(ms))
    }

    /// Whether it is zero (which most settings refuse).
    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }

    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl From<DurationSetting> for Duration {
    fn from(setting: DurationSetting) -> Self {
        setting.0
    }
}

impl FromStr for DurationSetting {
    type Err = DurationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let malformed = || DurationError(text.to_owned());
        let n: u64 = number.parse().map_err(|_| malformed())?;
        let (_, per) = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .ok_or_else(malformed)?;
        Ok(Self(Duration::from_millis(n.saturating_mul(*per))))
    }
}

impl fmt::Display for DurationSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 {
            return f.write_str("0s");
        }
        let (unit, per) = UNITS
            .iter()
            .find(|(_, per)| ms % per == 0)
            .unwrap_or(&("ms", 1));
        write!(f, "{}{unit}", ms / per)
    }
}

impl<'de> Deserialize<'de> for DurationSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Visitor)
    }
}

impl Serialize for DurationSetting {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Reads a string; anything else (a bare number, whose unit nobody can tell) is refused with
/// the same message as a malformed string.
struct Visitor;

impl de::Visitor<'_> for Visitor {
    type Value = DurationSetting;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"30s\"")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        text.parse().map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        Err(E::custom(DurationError(n.to_string())))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
        Err(E::custom(DurationError(n.to_string())))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
        Err(E::custom(DurationError(n.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_reads_and_shows_back_in_the_largest_exact_one() {
        for (text, ms, shown) in [
            ("500ms", 500, "500ms"),
            ("1000ms", 1_000, "1s"),
            ("30s", 30_000, "30s"),
            ("90s", 90_000, "90s"),
            ("120s", 120_000, "2m"),
            ("5m", 300_000, "5m"),
            ("1h", 3_600_000, "1h"),
            ("7d", 604_800_000, "7d"),
        ] {
            let setting: DurationSetting = text.parse().expect(text);
            assert_eq!(setting.get(), Duration::from_millis(ms), "{text}");
            assert_eq!(setting.to_string(), shown, "{text}");
        }
    }

    #[test]
    fn anything_else_says_how_to_write_one() {
        for bad in [
            "",
            "5",
            "s",
            "1.5s",
            "5 s",
            "-1s",
            "5S",
            "5sec",
            "\u{1b}[2J",
        ] {
            let error = bad.parse::<DurationSetting>().expect_err(bad).to_string();
            assert!(
                error.contains("is not a duration: write e.g."),
                "{bad}: {error}"
            );
            assert!(!error.contains('\u{1b}'), "{error}");
        }
        for zero in ["0s", "0ms", "00d"] {
            let setting = zero.parse::<DurationSetting>().expect(zero);
            assert!(setting.is_zero(), "{zero}");
            assert_eq!(setting.to_string(), "0s", "{zero}");
        }
    }

    #[test]
    fn a_file_gives_a_string_and_gets_it_back() {
        #[derive(Deserialize)]
        struct File {
            ttl: DurationSetting,
        }
        let file: File = toml::from_str("ttl = \"20s\"").expect("a duration");
        assert_eq!(file.ttl.get(), Duration::from_secs(20));
        let shown = serde_json::to_string(&file.ttl).expect("shown");
        assert_eq!(shown, "\"20s\"");
        for bare in ["ttl = 20", "ttl = 2.5"] {
            let error = toml::from_str::<File>(bare).err().expect(bare).to_string();
            assert!(error.contains("is not a duration"), "{error}");
        }
    }
}
