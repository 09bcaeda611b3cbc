//! Comparing what two versions did with one record.

use crate::component::TrapKind;
use crate::outcome::Outcome;
use crate::publish::RecordedPublish;

/// What one version did with one record: the outcome settled (the registration's `on_trap`
/// stand-in after a trap), the trap if the call trapped on it, and the publishes the stream
/// accepted (or, for a shadow, would have) while the call was on it, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handling {
    /// The outcome.
    pub outcome: Outcome,
    /// How the call failed on this record, if it did.
    pub trap: Option<TrapKind>,
    /// The publishes made for it.
    pub publishes: Vec<RecordedPublish>,
}

impl std::fmt::Display for Handling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.trap {
            Some(kind) => write!(f, "trap ({kind}), settled as {}", self.outcome)?,
            None => write!(f, "{}", self.outcome)?,
        }
        write!(f, ", {} publishes", self.publishes.len())
    }
}

/// How a shadow's handling of a record compares with the live version's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    /// Same outcome, same trap (none), same publishes in the same order.
    Agree,
    /// The shadow's call trapped on the record (whatever the live version did).
    Trap,
    /// Another outcome, or other publishes: those only the live version made, then those
    /// only the shadow made, each described for an operator.
    Disagree {
        /// The publishes that differ, each prefixed `live only:` or `shadow only:`.
        publishes: Vec<String>,
    },
}

/// Compares `shadow` with `live` for one record: the outcome kind (with a `retry_after`'s
/// delay) and trap, then the publishes (stream, key, payload) as ordered lists.
pub fn compare(live: &Handling, shadow: &Handling) -> Comparison {
    if shadow.trap.is_some() {
        return Comparison::Trap;
    }
    if live.outcome == shadow.outcome && live.trap.is_none() && live.publishes == shadow.publishes {
        return Comparison::Agree;
    }
    let only = |side: &str, these: &[RecordedPublish], others: &[RecordedPublish]| {
        these
            .iter()
            .filter(|p| !others.contains(p))
            .map(|p| format!("{side} only: {p}"))
            .collect::<Vec<_>>()
    };
    let mut publishes = only("live", &live.publishes, &shadow.publishes);
    publishes.extend(only("shadow", &shadow.publishes, &live.publishes));
    if publishes.is_empty() && live.publishes != shadow.publishes {
        publishes.push(format!(
            "same publishes in another order or number ({} live, {} shadow)",
            live.publishes.len(),
            shadow.publishes.len()
        ));
    }
    Comparison::Disagree { publishes }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::record::OutgoingRecord;

    fn publish(key: &str, payload: &str) -> RecordedPublish {
        let record = OutgoingRecord {
            partition_key: key.into(),
            payload: payload.as_bytes().to_vec(),
            headers: vec![],
        };
        RecordedPublish::of("out", &record)
    }

    fn handled(outcome: Outcome, publishes: Vec<RecordedPublish>) -> Handling {
        Handling {
            outcome,
            trap: None,
            publishes,
        }
    }

    #[test]
    fn same_outcome_and_publishes_agree() {
        let live = handled(Outcome::Ack, vec![publish("k", "a")]);
        assert_eq!(compare(&live, &live.clone()), Comparison::Agree);
    }

    #[test]
    fn another_outcome_disagrees_with_no_publish_named() {
        let live = handled(Outcome::Ack, vec![]);
        let shadow = handled(Outcome::Drop, vec![]);
        assert_eq!(
            compare(&live, &shadow),
            Comparison::Disagree { publishes: vec![] }
        );
        let later = handled(Outcome::RetryAfter(Duration::from_secs(2)), vec![]);
        let sooner = handled(Outcome::RetryAfter(Duration::from_secs(1)), vec![]);
        assert!(matches!(
            compare(&later, &sooner),
            Comparison::Disagree { .. }
        ));
    }

    #[test]
    fn other_publishes_disagree_and_are_named() {
        let live = handled(Outcome::Ack, vec![publish("k", "a"), publish("k", "b")]);
        let shadow = handled(Outcome::Ack, vec![publish("k", "a"), publish("k", "c")]);
        let Comparison::Disagree { publishes } = compare(&live, &shadow) else {
            panic!("a changed payload disagrees");
        };
        assert_eq!(publishes.len(), 2);
        assert!(publishes[0].starts_with("live only: out key=k 1 bytes"));
        assert!(publishes[1].starts_with("shadow only: out key=k"));
        let reordered = handled(Outcome::Ack, vec![publish("k", "b"), publish("k", "a")]);
        let Comparison::Disagree { publishes } = compare(&live, &reordered) else {
            panic!("another order disagrees");
        };
        assert!(publishes[0].contains("another order"));
    }

    #[test]
    fn a_shadow_trap_is_a_trap_and_a_live_trap_is_not_agreement() {
        let live = handled(Outcome::Ack, vec![]);
        let trapped = Handling {
            outcome: Outcome::Retry,
            trap: Some(TrapKind::Panic),
            publishes: vec![],
        };
        assert_eq!(compare(&live, &trapped), Comparison::Trap);
        let fine = handled(Outcome::Retry, vec![]);
        assert!(matches!(
            compare(&trapped, &fine),
            Comparison::Disagree { .. }
        ));
    }
}
