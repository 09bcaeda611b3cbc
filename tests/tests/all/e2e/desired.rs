//! The fleet's desired-state stores on local servers: the desired-state table on dynalite
//! (conditional writes: racing changes never interleave) and the component bucket on moto's
//! S3 (content-addressed bytes, checked when read).

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use ruststream_fleet::desired::{
    AppDesired, AppId, ComponentBucket, DesiredError, DesiredTable, LiveVersion, Shadow,
};
use ruststream_tests::servers::{LocalDynamo, LocalSts, sdk_config};

const TABLE: &str = "ruststream.desired";

async fn table(dynamo: &LocalDynamo) -> anyhow::Result<DesiredTable> {
    let table = DesiredTable::new(dynamo.client().await, TABLE);
    table.create_if_missing().await?;
    // A second host making it again finds it made.
    table.create_if_missing().await?;
    Ok(table)
}

/// Writer `n`'s whole change: every field it sets says `n`.
fn change_of(n: usize) -> impl FnOnce(&mut AppDesired) {
    move |state| {
        state.go_live(
            LiveVersion::new(format!("hash-{n}"), format!("{n}.0.0")),
            10,
        );
        state.shadow = Some(Shadow {
            hash: format!("hash-{n}"),
            sample_percent: n as u32 + 1,
        });
        state.paused = n % 2 == 1;
    }
}

/// Which writer a state is wholly from, if it is wholly from one.
fn writer_of(state: &AppDesired) -> Option<usize> {
    let live = state
        .live
        .as_ref()?
        .hash
        .strip_prefix("hash-")?
        .parse()
        .ok()?;
    let shadow = state.shadow.as_ref()?;
    let whole = shadow.hash == format!("hash-{live}")
        && shadow.sample_percent == live as u32 + 1
        && state.paused == (live % 2 == 1)
        && state.changed_by == format!("writer-{live}");
    whole.then_some(live)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_changes_of_one_app_never_interleave() -> anyhow::Result<()> {
    let dynamo = LocalDynamo::start().await?;
    let table = table(&dynamo).await?;
    let app = AppId::new("acme", "books");

    // Eight operators decide on the same (empty) state at once: exactly one is recorded.
    let racing = (0..8).map(|n| {
        let (table, app) = (table.clone(), app.clone());
        tokio::spawn(async move {
            (table.change(&app, Some(0), &format!("writer-{n}"), change_of(n))).await
        })
    });
    let mut won = Vec::new();
    for (n, joined) in racing.enumerate() {
        match joined.await? {
            Ok(state) => won.push((n, state)),
            Err(DesiredError::Raced { seen, now, .. }) => {
                assert_eq!(seen, 0, "refused against what it saw");
                assert_eq!(now.revision, 1, "and told what won: {now:?}");
            }
            Err(other) => return Err(other.into()),
        }
    }
    assert_eq!(won.len(), 1, "one change of those decided on revision 0");
    let recorded = table.get(&app).await?.expect("recorded");
    assert_eq!(writer_of(&recorded), Some(won[0].0), "whole: {recorded:?}");
    assert_eq!(recorded, won[0].1);

    // Eight more that apply to whatever is recorded: each is recorded whole after another, or
    // refused whole; the revisions count exactly those recorded.
    let racing = (8..16).map(|n| {
        let (table, app) = (table.clone(), app.clone());
        tokio::spawn(async move {
            (table.change(&app, None, &format!("writer-{n}"), change_of(n))).await
        })
    });
    let mut recorded_revisions = BTreeSet::new();
    for joined in racing {
        match joined.await? {
            Ok(state) => {
                assert!(writer_of(&state).is_some(), "whole: {state:?}");
                recorded_revisions.insert(state.revision);
            }
            Err(DesiredError::Raced { now, .. }) => {
                assert!(writer_of(&now).is_some(), "what it raced is whole: {now:?}");
            }
            Err(other) => return Err(other.into()),
        }
    }
    let last = table.get(&app).await?.expect("recorded");
    assert!(writer_of(&last).is_some(), "whole: {last:?}");
    assert_eq!(
        last.revision,
        1 + recorded_revisions.len() as u64,
        "one revision per change recorded, none lost: {recorded_revisions:?}"
    );
    assert_eq!(
        recorded_revisions,
        (2..=last.revision).collect::<BTreeSet<_>>()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_decided_on_an_old_revision_is_refused_naming_what_came_since()
-> anyhow::Result<()> {
    let dynamo = LocalDynamo::start().await?;
    let table = table(&dynamo).await?;
    let books = AppId::new("acme", "books");
    let v1 = LiveVersion::new("h1", "1.0.0");
    let v2 = LiveVersion::new("h2", "2.0.0");
    let first = (table.change(&books, Some(0), "alice", |s| s.go_live(v1.clone(), 10))).await?;
    assert_eq!(first.revision, 1);
    let second = (table.change(&books, Some(1), "bob", |s| s.go_live(v2.clone(), 10))).await?;
    assert_eq!(second.kept, [v1.clone(), v2.clone()]);

    let stale = table
        .change(&books, Some(1), "carol", |s| s.undeploy())
        .await;
    let Err(error @ DesiredError::Raced { .. }) = stale else {
        panic!("a change decided on revision 1 went through: {stale:?}");
    };
    let said = error.to_string();
    for named in ["`acme/books`", "since revision 1", "revision 2 by bob"] {
        assert!(said.contains(named), "the refusal names {named}: {said}");
    }
    assert_eq!(
        table.get(&books).await?,
        Some(second.clone()),
        "nothing applied"
    );

    // Every app, in key order; an item this host cannot read is named, not skipped.
    let tales = AppId::new("acme", "tales");
    (table.change(&tales, None, "alice", |s| s.paused = true)).await?;
    let all = table.all().await?;
    let apps: Vec<String> = all.iter().map(|s| s.app.key()).collect();
    assert_eq!(apps, ["acme/books", "acme/tales"]);
    dynamo
        .client()
        .await
        .put_item()
        .table_name(TABLE)
        .item("app", AttributeValue::S("acme/broken".into()))
        .item("revision", AttributeValue::N("1".into()))
        .item("state", AttributeValue::S("{not json".into()))
        .send()
        .await?;
    let unreadable = table.all().await;
    let Err(error @ DesiredError::Unreadable { .. }) = unreadable else {
        panic!("a broken item was read: {unreadable:?}");
    };
    assert!(error.to_string().contains("`acme/broken`"), "{error}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_bytes_are_kept_by_their_hash_and_checked_when_read() -> anyhow::Result<()> {
    let moto = LocalSts::start().await?;
    let config = sdk_config(&moto.endpoint()).await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let bucket = ComponentBucket::new(s3.clone(), "ruststream-components");
    bucket.create_if_missing().await?;
    bucket.create_if_missing().await?;

    let bytes = b"\0asm component bytes".to_vec();
    let hash = bucket.put(&bytes).await?;
    assert_eq!(
        hash,
        ruststream_runtime::component::compile::content_hash(&bytes)
    );
    assert_eq!(
        bucket.put(&bytes).await?,
        hash,
        "the same bytes, the same name"
    );
    assert_eq!(bucket.get(&hash).await?, bytes);

    let absent = "0".repeat(64);
    let missing = bucket.get(&absent).await;
    assert!(
        matches!(&missing, Err(DesiredError::Missing { hash, .. }) if *hash == absent),
        "{missing:?}"
    );

    // Bytes changed under their name (by hand, or by someone with the bucket's rights) are
    // refused, never handed out to be run.
    s3.put_object()
        .bucket("ruststream-components")
        .key(format!("components/sha256/{hash}.wasm"))
        .body(aws_sdk_s3::primitives::ByteStream::from(
            b"\0asm altered".to_vec(),
        ))
        .send()
        .await?;
    let altered = bucket.get(&hash).await;
    let Err(error @ DesiredError::Altered { .. }) = altered else {
        panic!("altered bytes were handed out: {altered:?}");
    };
    assert!(error.to_string().contains(&hash), "{error}");
    Ok(())
}
