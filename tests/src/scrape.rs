//! A Prometheus text exposition, parsed: what a scraper would read from `GET /metrics`.

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};

/// One sample: a series (name and labels) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric's name, with its `_count`, `_sum` or `_bucket` suffix if it has one.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// Every sample of one scrape.
#[derive(Debug, Clone, Default)]
pub struct Scrape(pub Vec<Sample>);

impl Scrape {
    /// Parses the text format: comments skipped, one sample per line.
    ///
    /// # Errors
    /// A line that is not `name{labels} value` (labels optional), naming the line.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut samples = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let sample = parse_line(line).with_context(|| format!("line {}: {line}", index + 1))?;
            samples.push(sample);
        }
        Ok(Self(samples))
    }

    /// The samples of `name` whose labels include every one of `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0.iter().filter(move |sample| {
            sample.name == name
                && labels
                    .iter()
                    .all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(value))
        })
    }

    /// The sum of the samples of `name` whose labels include `labels` (0 when there are none).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// The largest of those samples, if any.
    pub fn max(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, labels)
            .map(|s| s.value)
            .reduce(f64::max)
    }
}

fn parse_line(line: &str) -> anyhow::Result<Sample> {
    let (series, value) = line.rsplit_once(' ').context("no value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        value => value.parse().context("the value is not a number")?,
    };
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (
            name,
            parse_labels(rest.strip_suffix('}').context("no `}`")?)?,
        ),
        None => (series, BTreeMap::new()),
    };
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `key="value",...`, values with `\\`, `\"` and `\n` escapes.
fn parse_labels(text: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").context("a label without `=\"`")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => bail!("an escape at the end"),
                },
                Some((at, '"')) => break at,
                Some((_, c)) => value.push(c),
                None => bail!("an unterminated label value"),
            }
        };
        labels.insert(key.trim_start_matches(',').to_owned(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_and_without_labels_are_read() -> anyhow::Result<()> {
        let scrape = Scrape::parse(
            "# HELP x y\n# TYPE x counter\nx_total{tenant=\"a\\\"b\",outcome=\"ack\"} 3\nup 1\nh_bucket{le=\"+Inf\"} +Inf\n",
        )?;
        assert_eq!(scrape.sum("x_total", &[("tenant", "a\"b")]), 3.0);
        assert_eq!(scrape.sum("x_total", &[("tenant", "b")]), 0.0);
        assert_eq!(scrape.max("up", &[]), Some(1.0));
        assert_eq!(
            scrape.max("h_bucket", &[("le", "+Inf")]),
            Some(f64::INFINITY)
        );
        assert!(Scrape::parse("x{a=\"1\" 2").is_err());
        Ok(())
    }
}
